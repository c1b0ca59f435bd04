"""The model section of the config, ``model``: Transformer dimensions and the positional encoding.

``PositionalConfig`` declares ``name``, ``max_positions``, ``cross_attention``, ``nope_every`` and ``plugins``; the schema configs
are checked against (``positional_schema()``, a subclass built from the scheme registry) adds one
section per scheme that declares ``Options`` (``model.positional.rope``, ``model.positional.t5``,
...), in registry order — rebuilt when a plugin joins the registry (``prepare_schemes``). An unknown
scheme name is a ``ConfigError`` that lists the known ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, Literal

from models.positional import SCHEMES, plugins, refuse_cross_attention, scheme_names, where_it_acts
from utils.config import require
from utils.errors import ConfigError


@dataclass
class PositionalConfig:
    """Positional encoding(s) (``model.positional``): ``name`` is one scheme or several joined by '+'
    (``learnable+t5``). The schema that configs are checked against, ``positional_schema()``, adds one
    section per registered scheme that declares ``Options`` (``model.positional.rope``, ...), which
    that scheme alone reads (``options``)."""

    name: str = "sinusoidal"  # a registered scheme (docs/schemes.md), or several joined by +
    max_positions: int = 1024  # size of position tables (learnable: a hard limit)
    cross_attention: bool = False  # relative/rotary schemes also in cross-attention
    # hybrid layers (RNoPE, Yang et al. 2025; SWAN-GPT): k >= 2 leaves every k-th self-attention layer of
    # each stack without positions (layers k-1, 2k-1, ...: NoPE), the scheme acting in the others; 0: in all
    nope_every: int = 0
    # plugin files whose SCHEMES join the registry (models/positional/plugins.py); in a YAML file relative to
    # it, on the command line to the working folder; absolute once loaded
    plugins: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        scheme_names(self.name)
        require(self.max_positions >= 1, "max_positions", "at least 1", self.max_positions)
        require(self.nope_every == 0 or self.nope_every >= 2, "nope_every", "0 (every layer has the scheme) or at "
                "least 2", self.nope_every)

    def options(self, scheme: str) -> Any:
        """The section ``model.positional.<scheme>`` (an instance of that scheme's ``Options``)."""
        return getattr(self, scheme)


_SCHEMAS: dict[tuple, type[PositionalConfig]] = {}


def positional_schema() -> type[PositionalConfig]:
    """The positional section's schema for the registry as it stands: one section per scheme with
    ``Options`` (the same class while the registry does not change)."""
    key = tuple((name, scheme.Options) for name, scheme in SCHEMES.items() if scheme.Options is not None)
    if key not in _SCHEMAS:
        _SCHEMAS[key] = make_dataclass("PositionalConfig", [(name, options, field(default_factory=options))
                                                            for name, options in key],
                                       bases=(PositionalConfig,), namespace={"__module__": __name__,
                                                                              "__doc__": PositionalConfig.__doc__})
    return _SCHEMAS[key]


def _positional_section() -> PositionalConfig:
    return positional_schema()()


def prepare_schemes(files: list[Path], names: list[str]) -> None:
    """Register before a config is checked what it needs beyond the built-ins: the plugin ``files``
    (absolute paths), then the installed packages' schemes among ``names`` not registered yet. The
    schema follows (``positional_schema``); refusals are one-line ``PluginError``s."""
    for path in files:
        plugins.load_file(path)
    unknown = [n for n in names if n not in SCHEMES]
    if unknown:
        plugins.load_installed(unknown)


TEST_TIME_SECTIONS = ("length_scaling",)  # model settings that leave the weights as they are (checkpoints fit)


@dataclass
class LengthScalingConfig:
    """``model.length_scaling``: test-time settings for inputs longer than training's, decoded by the
    length study's evaluation variants. ``logn``: every attention's logits (content and positional
    bias) multiplied by max(1, ln n / ln n_train), n the keys a query attends to (the source's real
    tokens in encoder self- and cross-attention, the query's position + 1 in decoder
    self-attention), n_train the longest training sequence in tokens on the keys' side (Chiang and
    Cholak 2022; clamped at 1, as Qwen's log-n attention is, so inputs within the training lengths
    decode as trained). The training lengths are the run's (its manifest's
    ``longest_training_tokens``), which an evaluation variant fills in: a model is not built with
    a setting and unknown lengths (``train_tokens``).

    ``rotary``: the rotary schemes' frequencies rescaled per sentence by s = max(1, source tokens /
    the longest training source), in every attention the scheme acts in (the decoder's too: a
    translation's length follows its source's, and one s per sentence keeps its cached keys
    consistent): ``pi`` position interpolation, ``ntk`` NTK-aware base, ``yarn`` YaRN's ramp between
    the two (bounds ``yarn_alpha``, ``yarn_beta`` on training length over wavelength) and its
    temperature (``models.positional.frequency_scaling``). Refused for schemes without rotary
    frequencies."""

    logn: bool = False  # logits x max(1, ln n / ln n_train) in every attention
    rotary: Literal["none", "pi", "ntk", "yarn"] = "none"  # rotary frequencies rescaled per sentence
    yarn_alpha: float = 1.0  # YaRN: a frequency whose wavelength fits under alpha times into n_train is interpolated
    yarn_beta: float = 32.0  # YaRN: one that fits over beta times is kept as trained (a linear ramp between)
    train_source_tokens: int = 0  # n_train of encoder self- and cross-attention: the longest training source
    train_target_tokens: int = 0  # n_train of decoder self-attention: the longest training target

    def __post_init__(self) -> None:
        for name in ("train_source_tokens", "train_target_tokens"):
            require(getattr(self, name) >= 0, name, "0 (not known yet) or more", getattr(self, name))
        require(0 <= self.yarn_alpha < self.yarn_beta, "yarn_alpha", f"at least 0 and below yarn_beta "
                f"({self.yarn_beta})", self.yarn_alpha)

    def train_tokens(self, side: str, setting: str) -> int:
        """n_train on ``side`` ("source" or "target") for ``setting`` (its name in errors); unknown
        training lengths are a one-line ``ConfigError``."""
        n = self.train_source_tokens if side == "source" else self.train_target_tokens
        if n <= 1:
            raise ConfigError(f"model.length_scaling.{setting} needs the run's training lengths (model.length_scaling."
                              f"train_{side}_tokens is {n}); an evaluation variant takes them from the run's manifest")
        return n


@dataclass
class ModelConfig:
    """Encoder-decoder Transformer dimensions (defaults: Transformer-base, Vaswani et al. 2017)."""

    d_model: int = 512  # width of embeddings and residual stream
    n_heads: int = 8  # attention heads per layer
    n_encoder_layers: int = 6  # encoder layers
    n_decoder_layers: int = 6  # decoder layers
    d_ff: int = 2048  # hidden width of the feed-forward sublayers
    dropout: float = 0.1  # on embeddings and sublayer outputs
    attention_dropout: float = 0.0  # on the attention weights
    # sdpa: a bias is a float mask for PyTorch's scaled_dot_product_attention (materialised per
    # batch); flex: schemes whose bias reads positions only (or FoX's gates) add it inside
    # FlexAttention from small tables, the others keep sdpa. flex trains on a GPU only.
    attention_kernel: Literal["sdpa", "flex"] = "sdpa"
    # the attention's normaliser: softmax, or ssmax — Scalable-Softmax (Nakanishi 2025): every logit (content
    # and positional bias) times s_h ln n, n the keys a query sees, s learned per head and layer; with any scheme
    # (FlexAttention then keeps SDPA; CTranslate2 has no form for it)
    softmax: Literal["softmax", "ssmax"] = "softmax"
    activation: Literal["relu", "gelu", "silu"] = "relu"  # of the feed-forward sublayers (silu: x sigmoid(x))
    norm_first: bool = False  # False: post-norm as in the paper
    tie_embeddings: bool = True  # output projection shares the target embedding matrix
    positional: PositionalConfig = field(default_factory=_positional_section)
    length_scaling: LengthScalingConfig = field(default_factory=LengthScalingConfig)

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff"):
            require(getattr(self, name) >= 1, name, "at least 1", getattr(self, name))
        require(self.d_model % self.n_heads == 0, "n_heads", f"a divisor of model.d_model ({self.d_model})",
                self.n_heads)
        require(0 <= self.dropout < 1, "dropout", "in [0, 1)", self.dropout)
        require(0 <= self.attention_dropout < 1, "attention_dropout", "in [0, 1)", self.attention_dropout)
        require(self.attention_kernel != "flex" or self.attention_dropout == 0, "attention_dropout",
                "0 with model.attention_kernel=flex (FlexAttention has no dropout on the weights)",
                self.attention_dropout)
        require(self.softmax == "softmax" or not self.length_scaling.logn, "length_scaling.logn",
                "false with model.softmax=ssmax (SSMax already scales every logit by a learned multiple of ln n)", True)
        for name in scheme_names(self.positional.name):
            SCHEMES[name].check_config(self)  # constraints a scheme puts on the dimensions
            if SCHEMES[name].card.cross_attention == "refused":
                refuse_cross_attention(self, name)
        self._check_hybrid_layers()
        rotary = [name for name, scheme in SCHEMES.items() if scheme.card.scales_frequencies]
        require(self.length_scaling.rotary == "none"
                or any(SCHEMES[n].card.scales_frequencies for n in scheme_names(self.positional.name)),
                "length_scaling.rotary", f"none with model.positional.name={self.positional.name} (PI, NTK and YaRN "
                f"rescale rotary frequencies: {', '.join(rotary)})", self.length_scaling.rotary)

    def _check_hybrid_layers(self) -> None:
        """Hybrid layers leave a layer's attention without positions: a scheme that adds to the
        embeddings (added once, below every layer) has nothing a layer could leave out."""
        if not self.positional.nope_every:
            return
        for name in scheme_names(self.positional.name):
            card = SCHEMES[name].card
            acts = SCHEMES[card.evaluates_as(self) if card.evaluates_as else name]
            require("embeddings" not in where_it_acts(acts), "positional.nope_every", f"0 with {name} (it adds to "
                    "the embeddings, below every layer; hybrid layers need a scheme that acts in attention)",
                    self.positional.nope_every)
