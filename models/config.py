"""The model section of the config, ``model``: Transformer dimensions and the positional encoding.

``PositionalConfig`` is collected from the scheme registry: beside ``name``, ``max_positions`` and
``cross_attention`` it has one section per scheme that declares ``Options`` (``model.positional.rope``,
``model.positional.t5``, ...), in registry order. An unknown scheme name is a ``ConfigError`` that
lists the known ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Literal

from models.positional import SCHEMES, scheme_names
from utils.config import require


def _positional_config() -> type:
    sections = [(name, scheme.Options, field(default_factory=scheme.Options))
                for name, scheme in SCHEMES.items() if scheme.Options is not None]

    def check(self) -> None:
        scheme_names(self.name)
        require(self.max_positions >= 1, "max_positions", "at least 1", self.max_positions)

    return make_dataclass("PositionalConfig", [
        ("name", str, field(default="sinusoidal")),  # one scheme, or several joined by '+' (learnable+t5)
        ("max_positions", int, field(default=1024)),  # size of position tables (learnable: a hard limit)
        ("cross_attention", bool, field(default=False)),  # relative/rotary schemes also in cross-attention
        *sections,
    ], namespace={"__post_init__": check, "__module__": __name__,
                  "__doc__": "Positional encoding(s) (``model.positional``): ``name`` is one scheme or "
                             "several joined by '+'; each scheme reads only its own section."})


PositionalConfig = _positional_config()


@dataclass
class ModelConfig:
    """Encoder-decoder Transformer dimensions (defaults: Transformer-base, Vaswani et al. 2017)."""

    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation: Literal["relu", "gelu"] = "relu"
    norm_first: bool = False  # False: post-norm as in the paper
    tie_embeddings: bool = True
    positional: PositionalConfig = field(default_factory=PositionalConfig)  # type: ignore[valid-type]

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff"):
            require(getattr(self, name) >= 1, name, "at least 1", getattr(self, name))
        require(self.d_model % self.n_heads == 0, "n_heads", f"a divisor of model.d_model ({self.d_model})",
                self.n_heads)
        require(0 <= self.dropout < 1, "dropout", "in [0, 1)", self.dropout)
        require(0 <= self.attention_dropout < 1, "attention_dropout", "in [0, 1)", self.attention_dropout)
        for name in scheme_names(self.positional.name):
            SCHEMES[name].check_config(self)  # constraints a scheme puts on the dimensions
