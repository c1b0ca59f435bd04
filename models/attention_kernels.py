"""How attention's probabilities meet the values, once the queries, keys and values are projected and
turned: a small backend object chosen when the attention is built (``attention_kernel``), called with
one ``Attending`` per call.

- ``ExplicitKernel``: logits, softmax and the weighted sum written out, so the probabilities are in
  hand — for the weights (attention maps) or a scheme's value term (``PositionalEncoding.value_term``).
- ``FusedKernel`` (``model.attention_kernel: sdpa``): ``F.scaled_dot_product_attention``, a
  positional ``score_bias`` folded into its float mask; the explicit kernel where the probabilities
  are needed.
- ``FlexKernel`` (``flex``): a scheme's ``score_mod`` (its bias from positions alone, or FoX's gates)
  and the masks added inside FlexAttention, so no (B, H, Tq, Tk) bias is materialised; the fused
  kernel for a scheme without one, under a logit scaling, or where the probabilities are needed.

Shapes: q (B, H, Tq, Dk), k (B, H, Tk, Dk), v (B, H, Tk, Dh); out (B, H, Tq, Dh); weights
(B, H, Tq, Tk).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

from models.dropout import dropout as drop
from models.positional.base import PositionalEncoding


@dataclass(frozen=True)
class Attending:
    """One attention call past its projections: the queries, keys, values and the keys' token states
    (B, H, Tk, F) or None; the scheme and the positions q_pos (Tq,), k_pos (Tk,); the padding keys
    (B, Tk) (True at padding) or None; ``causal``; ``cached`` (keys from earlier steps came in);
    ``scale`` of q · k; the logit scaling's ``factor`` (``models.logit_scaling``) or None; the
    attention dropout's ``p`` (0 outside training)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    state: torch.Tensor | None
    pe: PositionalEncoding
    q_pos: torch.Tensor
    k_pos: torch.Tensor
    key_padding_mask: torch.Tensor | None
    causal: bool
    cached: bool
    scale: float
    factor: torch.Tensor | None
    p: float

    def queries_and_mask(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The queries and the mask of the kernels that take one (bool "may attend", or float with the
        scheme's score and state biases and -inf holes): the logit scaling's factor multiplies every
        logit, content and positional bias alike."""
        q, bias = self.q, self.pe.score_bias(self.q, self.k, self.q_pos, self.k_pos)
        if self.state is not None:
            from_state = self.pe.state_bias(self.state, self.q_pos, self.k_pos)
            bias = from_state if bias is None else bias + from_state
        if self.factor is not None:
            q = q * self.factor.to(q.dtype)
            bias = None if bias is None else bias * self.factor
        return q, build_mask(self.q_pos, self.k_pos, self.key_padding_mask, self.causal, bias, q.dtype)


Attended = tuple[torch.Tensor, torch.Tensor | None]  # output (B, H, Tq, Dh), weights (B, H, Tq, Tk) or None


class ExplicitKernel:
    """Softmax(q kᵀ · scale + mask) v, plus the scheme's value term; the weights before dropout."""

    name = "explicit"

    def __call__(self, a: Attending, need_weights: bool) -> Attended:
        q, mask = a.queries_and_mask()
        logits = torch.matmul(q, a.k.transpose(-1, -2)) * a.scale
        if mask is not None:
            logits = logits.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else logits + mask
        probs = torch.softmax(logits.float(), dim=-1).to(q.dtype)
        weights = probs if need_weights else None
        probs = drop(probs, a.p)
        out = torch.matmul(probs, a.v)
        extra = a.pe.value_term(probs, a.q_pos, a.k_pos)
        return (out if extra is None else out + extra), weights


class FusedKernel:
    """``F.scaled_dot_product_attention`` (its own causal mask where that is the whole mask); the
    explicit kernel where the weights or a value term need the probabilities."""

    name = "sdpa"
    explicit = ExplicitKernel()

    def __call__(self, a: Attending, need_weights: bool) -> Attended:
        if need_weights or a.pe.has_value_term:
            return self.explicit(a, need_weights)
        q, mask = a.queries_and_mask()
        # a plain causal mask over a whole sequence: let SDPA build it (faster kernels)
        is_causal = (a.causal and not a.cached and mask is not None and mask.dtype == torch.bool
                     and a.key_padding_mask is None and len(a.q_pos) == len(a.k_pos) and len(a.q_pos) > 1)
        out = F.scaled_dot_product_attention(q, a.k, a.v, attn_mask=None if is_causal else mask, dropout_p=a.p,
                                             scale=a.scale, is_causal=is_causal)
        return out, None


class FlexKernel(FusedKernel):
    """FlexAttention with the scheme's ``score_mod`` and the masks inside it; the fused kernel where the
    scheme has none, a logit scaling multiplies the logits, or the probabilities are needed."""

    name = "flex"

    def __call__(self, a: Attending, need_weights: bool) -> Attended:
        if a.factor is None and not (need_weights or a.pe.has_value_term):
            mod = a.pe.score_mod(a.q, a.k, a.q_pos, a.k_pos, a.state)
            if mod is not None:
                score_mod = masked_score_mod(mod, a.q_pos, a.k_pos, a.key_padding_mask, a.causal)
                return flex_attention(a.q, a.k, a.v, score_mod=score_mod, scale=a.scale), None
        return super().__call__(a, need_weights)


KERNELS: dict[str, type[FusedKernel]] = {"sdpa": FusedKernel, "flex": FlexKernel}


def attention_kernel(name: str) -> FusedKernel:
    """The backend of ``model.attention_kernel`` (``sdpa`` or ``flex``)."""
    if name not in KERNELS:
        raise ValueError(f"unknown attention kernel {name!r}; one of {', '.join(KERNELS)}")
    return KERNELS[name]()


def build_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, key_padding_mask: torch.Tensor | None,
               causal: bool, bias: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """Boolean "may attend" mask (True = keep) or, with a bias, a float mask with -inf holes.

    Broadcastable to (B, H, Tq, Tk); None when nothing is masked and there is no bias.
    Causal attention follows the position contract (``models.positional.base``): the keys end at
    the last query's position, so a single query (one decoding step) sees every key and needs no
    mask; deciding that from the lengths, not the positions' values, keeps the host from waiting
    on the device.
    """
    allowed = None
    if causal and len(q_pos) > 1:
        allowed = (k_pos[None, :] <= q_pos[:, None])[None, None]  # (1, 1, Tq, Tk)
    if key_padding_mask is not None:
        keep = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk)
        allowed = keep if allowed is None else allowed & keep
    if bias is None:
        return allowed
    bias = bias.to(dtype)
    if allowed is None:
        return bias
    return bias.masked_fill(~allowed, float("-inf"))


def masked_score_mod(mod, q_pos: torch.Tensor, k_pos: torch.Tensor, key_padding_mask: torch.Tensor | None,
                     causal: bool):
    """A FlexAttention ``score_mod``: the scheme's ``mod``, then -inf where ``build_mask`` would hide
    the key (the same rule: causal by position when several queries come at once, padding keys)."""
    hide_future = causal and len(q_pos) > 1

    def score_mod(score, b, h, q_idx, kv_idx):
        score = mod(score, b, h, q_idx, kv_idx)
        keep = None
        if hide_future:
            keep = k_pos[kv_idx] <= q_pos[q_idx]
        if key_padding_mask is not None:
            real = ~key_padding_mask[b, kv_idx]
            keep = real if keep is None else keep & real
        return score if keep is None else torch.where(keep, score, float("-inf"))

    return score_mod
