"""The positional-encoding interface: one base class, six hooks and ``training_positions``,
each a no-op by default.

Attention calls every hook every time and never branches on the scheme:

| hook | acts on | used by |
| --- | --- | --- |
| ``embed(x, pos)`` | token embeddings (B, T, D) | sinusoidal, learnable, shape, cape |
| ``rotate(q, k, q_pos, k_pos)`` | queries, keys (B, H, T, Dh) -> (B, H, T, Dk) | rope, xpos, p_rope, polar |
| ``score_bias(q, k, q_pos, k_pos)`` | logit bias, broadcastable to (B, H, Tq, Tk) | alibi, t5, fire, kerple, shaw, xl, deberta, nezha, dape_*, cope |
| ``token_state(x)`` | the self-attention layer's input (B, T, D) -> (B, H, T, F) | fox |
| ``state_bias(state, q_pos, k_pos)`` | additive logit bias from the keys' states (B, H, Tk, F) | fox |
| ``value_term(probs, q_pos, k_pos)`` | added to the attention output (B, H, Tq, Dh) | shaw, nezha |

``rotate`` reads the sentences' factors of test-time frequency scaling off the module itself
(``self.length_factor``, (B,) or None: the model holds them there for one forward pass,
``lengths_scaled``); a ``rotate`` written with a fifth parameter ``length_factor`` (the interface of 0.5
before 2026-11-30) still gets them there, with a ``DeprecationWarning`` when its class is defined, until 0.6.
``rotate`` may return queries and keys of another width Dk than the values' Dh (the same for both:
polar's magnitude-and-phase keys are 2 Dh wide); the logit scale stays 1/sqrt(Dh). Content-aware
biases (dape_*, cope) read the content logits q.k / sqrt(Dh) off the (rotated) q and k that
``score_bias`` receives. ``token_state`` is what a scheme derives from each token's input to
self-attention (fox's forget gates): attention computes it for the new tokens, caches it beside
their keys and values, and hands ``state_bias`` the states of all keys (cached first); the queries
are then the last Tq keys. It acts in self-attention only (a scheme that defines it does not act
in cross-attention).

Beside the hooks, ``training_positions(pos)`` lets a scheme replace the positions of one training
forward pass (``randomized``); schemes that randomise per sequence (``shape``, ``cape``) do it
inside ``embed`` when ``self.training``.

Positions are explicit integer tensors, never lengths: with a key/value cache holding ``start``
earlier steps, ``q_pos = start + arange(T_new)`` and ``k_pos = arange(start + T_new)``. They are
contiguous increasing ranges (except the increasing random subsets of ``randomized`` in
training, which therefore refuses bases that rely on contiguity, such as xl), and hooks never
read their values on the host (no ``int(pos.max())``): on a GPU that would stall every forward;
what a hook needs to know on the host it takes from the lengths. Every relative scheme uses
``rel = k_pos[None, :] - q_pos[:, None]`` (key minus query, shape (Tq, Tk)).

One instance serves one attention *kind* of one stack: ``"encoder"`` (bidirectional self-attention),
``"decoder"`` (causal self-attention) or ``"cross"`` (decoder queries over encoder keys). Its
tables are built once and shared by all layers of that stack. ``score_bias`` results are already
in logit units (scaled like q.k / sqrt(Dh)).
"""
from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import nn

from models.positional.card import SchemeCard
from utils.config import require

Kind = Literal["encoder", "decoder", "cross"]


@dataclass
class DistanceProfile:
    """How the score a scheme contributes varies with the offset d = key - query (for pictures).

    offsets: (L,) from -max_distance to max_distance; values: (H or 1, L); label: what they are.
    """

    offsets: torch.Tensor
    values: torch.Tensor
    label: str


def refuse_cross_attention(cfg, scheme: str) -> None:
    """The config error of a scheme defined for self-attention only (its card's ``cross_attention:
    refused``) when ``cfg`` (a ``ModelConfig``) asks for positions in cross-attention."""
    require(not cfg.positional.cross_attention, "positional.cross_attention",
            f"false with {scheme} (defined for self-attention; cross-attention keeps the plain dot product)", True)


def relative_positions(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """(Tq, Tk) LongTensor of key position minus query position."""
    return k_pos[None, :] - q_pos[:, None]


class PositionalEncoding(nn.Module):
    """Base class and the ``none`` scheme (NoPE): every hook leaves its input alone.

    Subclasses override the hooks they need and set ``has_value_term`` when ``value_term`` does
    something (attention then takes the explicit-softmax path), ``state_width`` when
    ``token_state`` does. ``score_scale`` multiplies the
    usual 1/sqrt(Dh) logit scale (DeBERTa uses 1/sqrt(3 Dh)). ``Options`` is the dataclass of the
    scheme's config section ``model.positional.<name>`` (None: no options); the config schema
    collects it from the registry. ``card`` holds the facts that are not arithmetic (summary, paper,
    export form, what it does in cross-attention, where it saturates, ...); what its pictures read
    off it is ``models.positional.profile``'s.

    NoPE (Kazemnejad et al. 2023): without positions the encoder is permutation-equivariant; the
    decoder still sees order through its causal mask.
    """

    Options: ClassVar[type | None] = None
    card: ClassVar[SchemeCard] = SchemeCard()  # what the scheme is beside its math (models/positional/card.py)
    # Whether ``score_bias`` reads the positions alone (never q or k): FlexAttention then adds it
    # from the (H, Tq, Tk) table inside its kernel (``score_mod``), not from a per-batch mask.
    bias_from_positions: ClassVar[bool] = False
    has_value_term = False
    score_scale = 1.0
    state_width = 0  # F, the width of what ``token_state`` returns (0: it returns None)

    def __init__(self, kind: Kind, d_model: int, n_heads: int):
        super().__init__()
        self.kind = kind
        self.d_model, self.n_heads = d_model, n_heads
        self.d_head = d_model // n_heads
        # (B,) each row's factor s >= 1 of test-time frequency scaling while the model holds one
        # (``lengths_scaled``), read by the schemes whose card ``scales_frequencies``; None: as trained
        self.length_factor: torch.Tensor | None = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        rotate = cls.__dict__.get("rotate")
        if rotate is not None and "length_factor" in inspect.signature(rotate).parameters:
            cls.rotate = _with_held_factor(cls, rotate)

    def score_mod(self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor,
                  state: torch.Tensor | None):
        """FlexAttention's ``score_mod`` ``(score, b, h, q_idx, kv_idx) -> score`` adding this
        scheme's logit bias from small tables, or None where it cannot (a bias of the content:
        attention then materialises it for SDPA) or adds none. Default: a bias of positions alone,
        as ``score_bias`` computes it once per call, looked up per (head, query, key)."""
        if not self.bias_from_positions:
            return None
        table = self.score_bias(q, k, q_pos, k_pos)[0].expand(self.n_heads, len(q_pos), len(k_pos))  # (H, Tq, Tk)

        def add_bias(score, b, h, q_idx, kv_idx):
            return score + table[h, q_idx, kv_idx]

        return add_bias

    @classmethod
    def check_config(cls, cfg) -> None:
        """Constraints the scheme puts on the model's dimensions (``cfg``: the ``ModelConfig``):
        raise ``utils.config.InvalidValue`` naming the field. None by default (a card's refusal of
        cross-attention is checked for every scheme, ``check_scheme``)."""

    @property
    def bidirectional(self) -> bool:
        """Whether queries see keys on both sides (encoder self-attention and cross-attention)."""
        return self.kind != "decoder"

    def embed(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """x: (B, T, D) scaled token embeddings, pos: (T,) -> (B, T, D)."""
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor,
               k_pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> the same shapes (or another width Dk). A scheme that
        scales its frequencies at test time reads each row's factor off ``self.length_factor``."""
        return q, k

    def score_bias(self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor,
                   k_pos: torch.Tensor) -> torch.Tensor | None:
        """Additive logit bias broadcastable to (B, H, Tq, Tk), or None."""
        return None

    def token_state(self, x: torch.Tensor) -> torch.Tensor | None:
        """x: (B, T, D) the self-attention layer's input at the new tokens -> (B, H, T, F) per-token
        quantities that attention caches beside the keys and hands to ``state_bias``, or None."""
        return None

    def state_bias(self, state: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        """state: (B, H, Tk, F) ``token_state`` of every key (the queries are the last Tq keys) ->
        additive logit bias broadcastable to (B, H, Tq, Tk), or None."""
        return None

    def value_term(self, probs: torch.Tensor, q_pos: torch.Tensor,
                   k_pos: torch.Tensor) -> torch.Tensor | None:
        """probs: (B, H, Tq, Tk) attention weights -> (B, H, Tq, Dh) added to the output, or None."""
        return None

    def training_positions(self, pos: torch.Tensor) -> torch.Tensor:
        """The positions a training forward pass gives every hook of this stack: pos (T,) =
        0..T-1 -> (T,) increasing, drawn once per pass. The identity by default; ``randomized``
        draws a sorted random subset. The model calls it only in training mode on whole
        sequences (teacher forcing), never while decoding, so evaluation sees 0..n-1."""
        return pos

    @property
    def position_limit(self) -> int | None:
        """Positions must be below this (a learned table's size), None: any position. The model
        checks it on the host, from the lengths, before it builds the positions."""
        return None


def where_it_acts(scheme: type[PositionalEncoding]) -> str:
    """``embeddings``, ``q, k``, ``logits``, ``values`` joined by ``+``, from the overridden
    hooks (or ``acts_on``); ``—`` for none."""
    if scheme.card.acts_on is not None:
        return scheme.card.acts_on
    hooks = [("embed", "embeddings"), ("rotate", "q, k"), ("score_bias", "logits"), ("state_bias", "logits"),
             ("value_term", "values")]
    labels = [label for hook, label in hooks if getattr(scheme, hook) is not getattr(PositionalEncoding, hook)]
    return " + ".join(dict.fromkeys(labels)) or "—"


def flex_form(scheme: type[PositionalEncoding]) -> str:
    """How ``model.attention_kernel: flex`` serves the scheme (docs/schemes.md): its bias from an
    (H, Tq, Tk) table of positions, its own ``score_mod`` (FoX's gates), its base's, or SDPA —
    where the bias reads the content (or a value term follows the weights) — or nothing to add."""
    if scheme.card.acts_on == "the base's":
        return "its base's"
    if scheme.bias_from_positions:
        return "score_mod: (H, Tq, Tk) table"
    if scheme.score_mod is not PositionalEncoding.score_mod:
        return "score_mod of its own"
    return "SDPA: the bias reads q, k" if adds_score_bias(scheme) else "— (no bias)"


def adds_score_bias(scheme: type[PositionalEncoding]) -> bool:
    """Whether ``score_bias`` returns a logit bias (read off the hooks; randomized: its base decides)."""
    return "logits" in where_it_acts(scheme).split(" + ")


def evaluated(pe: PositionalEncoding) -> PositionalEncoding:
    """The module that does ``pe``'s arithmetic at evaluation, whose tables an export writes: ``pe``,
    or the base a scheme evaluates as (its card's ``evaluates_as``; the base held as ``pe.base``)."""
    return evaluated(pe.base) if type(pe).card.evaluates_as is not None else pe


def evaluated_scheme(scheme: type[PositionalEncoding], cfg) -> str:
    """The registered scheme whose arithmetic ``scheme`` does at evaluation in the model ``cfg``."""
    return scheme.card.evaluates_as(cfg) if scheme.card.evaluates_as is not None else cfg.positional.name


def components(pe: PositionalEncoding) -> list[PositionalEncoding]:
    """The single schemes ``pe`` is made of: itself, or the parts of a combination."""
    return list(pe.parts) if isinstance(pe, CombinedPositional) else [pe]


class CombinedPositional(PositionalEncoding):
    """Several schemes at once (e.g. ``learnable+t5``): hooks applied in order, biases summed."""

    def __init__(self, parts: list[PositionalEncoding]):
        super().__init__(parts[0].kind, parts[0].d_model, parts[0].n_heads)
        self.parts = nn.ModuleList(parts)
        self.has_value_term = any(p.has_value_term for p in parts)
        self.score_scale = max(p.score_scale for p in parts)
        self.state_width = sum(p.state_width for p in parts)

    def embed(self, x, pos):
        for p in self.parts:
            x = p.embed(x, pos)
        return x

    def rotate(self, q, k, q_pos, k_pos):
        for p in self.parts:
            q, k = p.rotate(q, k, q_pos, k_pos)
        return q, k

    def training_positions(self, pos):
        for p in self.parts:
            pos = p.training_positions(pos)
        return pos

    def score_bias(self, q, k, q_pos, k_pos):
        return _sum_or_none(p.score_bias(q, k, q_pos, k_pos) for p in self.parts)

    def score_mod(self, q, k, q_pos, k_pos, state):
        """The parts' ``score_mod`` applied in turn; None when a part's bias has none (or a part
        keeps a token state: the parts' states are not split here)."""
        if self.state_width:
            return None
        biased = [p for p in self.parts if adds_score_bias(type(p))]
        mods = [p.score_mod(q, k, q_pos, k_pos, None) for p in biased]
        if not mods or any(m is None for m in mods):
            return None

        def add_all(score, b, h, q_idx, kv_idx):
            for mod in mods:
                score = mod(score, b, h, q_idx, kv_idx)
            return score

        return add_all

    def token_state(self, x):
        """The parts' states side by side along the last axis (each ``state_width`` wide)."""
        present = [s for s in (p.token_state(x) for p in self.parts) if s is not None]
        return torch.cat(present, dim=-1) if present else None

    def state_bias(self, state, q_pos, k_pos):
        owners = [p for p in self.parts if p.state_width]
        pieces = state.split([p.state_width for p in owners], dim=-1)
        return _sum_or_none(p.state_bias(s, q_pos, k_pos) for p, s in zip(owners, pieces))

    def value_term(self, probs, q_pos, k_pos):
        return _sum_or_none(p.value_term(probs, q_pos, k_pos) for p in self.parts)

    @property
    def position_limit(self) -> int | None:
        return min((p.position_limit for p in self.parts if p.position_limit is not None), default=None)


@contextmanager
def lengths_scaled(pe: PositionalEncoding, factor: torch.Tensor | None) -> Iterator[None]:
    """``pe`` and every scheme inside it (a combination's parts, randomized's base) hold ``factor``
    (B,) — each row's factor of test-time frequency scaling, the rows those of the attention ``pe``
    serves — as their ``length_factor`` for the block, None again after it. Nothing is set for
    None (training, and every model without ``model.length_scaling.rotary``)."""
    if factor is None:
        yield
        return
    held = [m for m in pe.modules() if isinstance(m, PositionalEncoding)]
    for module in held:
        module.length_factor = factor
    try:
        yield
    finally:
        for module in held:
            module.length_factor = None


def _with_held_factor(cls: type, rotate):
    """A ``rotate`` of the interface before 2026-11-30, which took the factor as a fifth parameter ``length_factor``:
    called with the factor the module holds. Deprecated: read ``self.length_factor`` instead."""
    warnings.warn(f"{cls.__module__}.{cls.__qualname__}.rotate takes `length_factor`, which the attention no "
                  "longer passes (deprecated; removed in 0.6): drop the parameter and read self.length_factor, the "
                  "(B,) factor the module holds during a forward pass; until then it is passed from there",
                  DeprecationWarning, stacklevel=3)

    @functools.wraps(rotate)
    def held(self, q, k, q_pos, k_pos):
        return rotate(self, q, k, q_pos, k_pos, self.length_factor)

    return held


def _sum_or_none(terms) -> torch.Tensor | None:
    total = None
    for t in terms:
        if t is not None:
            total = t if total is None else total + t
    return total


class NoPositional(PositionalEncoding):
    """The ``none`` scheme: the base class's no-op hooks under a name of its own, so that what it
    declares (its export) is not inherited by the schemes built on the base."""

    card = SchemeCard(
        title="NoPE",
        relative=True,
        summary="no positions (NoPE); the decoder still sees order through its causal mask",
        paper="kazemnejad",
        export_form="embeddings",
    )

