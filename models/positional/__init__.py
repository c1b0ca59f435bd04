"""Positional encodings: one file per scheme, a registry, and ``build_positional``.

Adding a scheme: write ``models/positional/<name>.py`` with a ``PositionalEncoding`` subclass
whose constructor takes ``(kind, model_cfg)``, then add one line to ``SCHEMES``.
"""
from __future__ import annotations

from models.positional.alibi import ALiBiPositional, alibi_slopes
from models.positional.base import CombinedPositional, Kind, PositionalEncoding, relative_positions
from models.positional.deberta import DebertaPositional
from models.positional.fire import FirePositional
from models.positional.learnable import LearnablePositional
from models.positional.nezha import NezhaPositional
from models.positional.rotary import RotaryPositional, apply_rotary
from models.positional.shaw import ShawPositional
from models.positional.sinusoidal import SinusoidalPositional, sinusoidal_table
from models.positional.t5 import T5Positional, relative_position_bucket
from models.positional.xl import TransformerXLPositional
from models.positional.xpos import XPosPositional
from utils.config import ModelConfig
from utils.errors import ConfigError

SCHEMES: dict[str, type[PositionalEncoding]] = {
    "none": PositionalEncoding,
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
}

# Schemes that add to the token embeddings: they act once per stack, never inside attention.
ABSOLUTE = {"sinusoidal", "learnable"}


def scheme_names(name: str) -> list[str]:
    """``"learnable+t5"`` -> ["learnable", "t5"], each checked against the registry."""
    names = [n.strip() for n in name.split("+")]
    for n in names:
        if n not in SCHEMES:
            raise ConfigError(f"unknown positional scheme '{n}' in model.positional.name "
                              f"(known: {', '.join(SCHEMES)})")
    return names


def build_positional(cfg: ModelConfig, kind: Kind) -> PositionalEncoding:
    """The positional module for one attention kind ("encoder", "decoder" or "cross").

    In cross-attention source and target positions are not aligned, so schemes act there only
    with ``model.positional.cross_attention: true`` (the seed project's behaviour).
    """
    names = [n for n in scheme_names(cfg.positional.name) if n != "none"]
    if kind == "cross":
        names = [n for n in names if n not in ABSOLUTE] if cfg.positional.cross_attention else []
    parts = [SCHEMES[n](kind, cfg) for n in names]
    if not parts:
        return PositionalEncoding(kind, cfg.d_model, cfg.n_heads)
    return parts[0] if len(parts) == 1 else CombinedPositional(parts)


__all__ = ["SCHEMES", "build_positional", "scheme_names", "sinusoidal_table", "apply_rotary",
           "alibi_slopes", "relative_position_bucket", "relative_positions", "PositionalEncoding"]
