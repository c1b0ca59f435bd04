"""Positional encodings: one file per scheme, the registry ``SCHEMES``, and ``build_positional``.

Adding a scheme: write ``models/positional/<name>.py`` with a ``PositionalEncoding`` subclass
whose constructor takes ``(kind, model_cfg)`` (its options, if any, as a dataclass ``Options`` in
the same file, read from ``model_cfg.positional.<name>``), then add one line to ``SCHEMES``. The
config schema (``models.config``) collects the options from here; nothing else names schemes.
A scheme from outside the repository (a file a config names, or an installed package's entry point)
joins ``SCHEMES`` through ``models.positional.plugins``; ``builtin_schemes()`` are the repository's own.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable

from models.positional import plugins, registry
from models.positional.alibi import ALiBiPositional
from models.positional.base import (
    CombinedPositional,
    DistanceProfile,
    Kind,
    NoPositional,
    PositionalEncoding,
    adds_score_bias,
    components,
    evaluated,
    evaluated_scheme,
    flex_form,
    refuse_cross_attention,
    where_it_acts,
)
from models.positional.cape import CapePositional
from models.positional.card import KINDS, SchemeCard
from models.positional.cope import ContextualPositional
from models.positional.dape import DapeAlibiPositional, DapeFirePositional, DapeKerplePositional
from models.positional.deberta import DebertaPositional
from models.positional.fire import FirePositional
from models.positional.fope import FourierPositional
from models.positional.fox import ForgettingPositional
from models.positional.kerple import KerplePositional
from models.positional.learnable import LearnablePositional
from models.positional.nezha import NezhaPositional
from models.positional.p_rope import PartialRotaryPositional
from models.positional.polar import PolarPositional
from models.positional.profile import distance_profile, embedding_table
from models.positional.randomized import RandomizedPositional
from models.positional.rotary import RotaryPositional
from models.positional.shape import ShapePositional
from models.positional.shaw import ShawPositional
from models.positional.sinusoidal import SinusoidalPositional
from models.positional.t5 import T5Positional
from models.positional.xl import TransformerXLPositional
from models.positional.xpos import XPosPositional
from utils.config import InvalidValue

SCHEMES: dict[str, type[PositionalEncoding]] = registry.SCHEMES
scheme_parts = registry.scheme_parts
SCHEMES.update({
    "none": NoPositional,
    "sinusoidal": SinusoidalPositional,
    "learnable": LearnablePositional,
    "rope": RotaryPositional,
    "alibi": ALiBiPositional,
    "t5": T5Positional,
    "shaw": ShawPositional,
    "xl": TransformerXLPositional,
    "deberta": DebertaPositional,
    "nezha": NezhaPositional,
    "xpos": XPosPositional,
    "fire": FirePositional,
    "shape": ShapePositional,
    "cape": CapePositional,
    "kerple": KerplePositional,
    "randomized": RandomizedPositional,
    "p_rope": PartialRotaryPositional,
    "polar": PolarPositional,
    "fox": ForgettingPositional,
    "dape_alibi": DapeAlibiPositional,
    "dape_kerple": DapeKerplePositional,
    "dape_fire": DapeFirePositional,
    "cope": ContextualPositional,
    "fope": FourierPositional,
})


def builtin_schemes() -> list[str]:
    """The registered schemes but the plugins', in registry order: what ``all`` means in a study or ``nmt scheme check``."""
    return [name for name in SCHEMES if name not in plugins.SOURCES]


def scheme_names(name: str) -> list[str]:
    """``"learnable+t5"`` -> ["learnable", "t5"], each checked against the registry."""
    names = registry.scheme_parts(name)
    unknown = [n for n in names if n not in SCHEMES]
    if unknown:
        plugins.load_installed(unknown)  # an installed package's scheme joins on first use
    for n in names:
        if n not in SCHEMES:
            close = difflib.get_close_matches(n, list(SCHEMES), n=2, cutoff=0.6)
            hint = f"'{n}' is unknown; did you mean {' or '.join(repr(c) for c in close)}?" if close else (
                f"'{n}' is unknown;")
            raise InvalidValue("name", f"a registered scheme, or several joined by + ({hint} known: "
                               f"{', '.join(SCHEMES)})", name)
    return names


def saturation_note(cfg) -> str | None:
    """Where the model ``cfg``'s (``ModelConfig``) schemes stop telling positions apart or leave
    them untrained (each card's ``saturation``), joined; None where none does."""
    found = [SCHEMES[n].card.saturation(cfg) for n in scheme_names(cfg.positional.name) if SCHEMES[n].card.saturation]
    return "; ".join(found) or None


def scheme_kind(name: str) -> str:
    """The group a figure draws the scheme in (``KINDS``): its card's ``kind`` where it says one (the
    schemes of 2024-25), else where it acts — the embeddings (or nowhere: ``none``; or through its base:
    randomized, whose default base is sinusoidal) "absolute", queries and keys "rotary", the logits or
    values "relative"."""
    scheme = SCHEMES[scheme_names(name)[0]]
    if scheme.card.kind is not None:
        return scheme.card.kind
    acts = where_it_acts(scheme)
    if acts in ("embeddings", "—", "the base's"):
        return KINDS[0]
    return KINDS[1] if acts == "q, k" else KINDS[2]


def scheme_table(cite: Callable[[str], str] = str) -> str:
    """The table of the registered schemes, from what each class declares: docs/schemes.md holds it
    (``python -m nmt docs`` writes it, citing each card's ``paper`` key as the bibliography does:
    ``cite``; a test keeps the page equal to the code)."""
    rows = ["| name | scheme | where it acts | relative | CTranslate2 export | FlexAttention | paper |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    rows += [f"| `{name}` | {scheme.card.summary} | {where_it_acts(scheme)} | {'yes' if scheme.card.relative else '—'} | "
             f"{scheme.card.export_form or '—'} | {flex_form(scheme)} | {cite(scheme.card.paper)} |"
             for name, scheme in SCHEMES.items()]
    return "\n".join(rows) + "\n"


def build_positional(cfg, kind: Kind) -> PositionalEncoding:
    """The positional module of a ``ModelConfig`` for one attention kind ("encoder", "decoder" or
    "cross").

    In cross-attention source and target positions are not aligned, so schemes act there only
    with ``model.positional.cross_attention: true`` (the seed project's behaviour), and never
    those that only add to the embeddings.
    """
    names = [n for n in scheme_names(cfg.positional.name) if n != "none"]
    if kind == "cross":
        names = [n for n in names if SCHEMES[n].card.cross_attention == "acts"] if cfg.positional.cross_attention else []
    parts = [SCHEMES[n](kind, cfg) for n in names]
    if not parts:
        return NoPositional(kind, cfg.d_model, cfg.n_heads)
    return parts[0] if len(parts) == 1 else CombinedPositional(parts)


__all__ = ["SCHEMES", "builtin_schemes", "KINDS", "build_positional", "saturation_note", "scheme_kind", "scheme_names",
           "scheme_parts", "scheme_table",
           "PositionalEncoding", "DistanceProfile", "SchemeCard", "refuse_cross_attention",
           "where_it_acts", "flex_form", "adds_score_bias", "evaluated", "evaluated_scheme", "components",
           "distance_profile", "embedding_table"]
