"""SHAPE: shifted absolute position embedding (Kiyono et al. 2021, EMNLP, "SHAPE: Shifted Absolute
Position Embedding for Transformers")."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.positional.card import SchemeCard
from models.positional.sinusoidal import SinusoidalPositional
from utils.config import require


@dataclass
class ShapeOptions:
    """``model.positional.shape``."""

    max_shift: int = 100  # K: training offsets k ~ U{0, ..., K}
    eval_shift: int = 0  # the offset at evaluation and decoding (0: plain sinusoidal positions)

    def __post_init__(self) -> None:
        require(self.max_shift >= 0, "max_shift", "0 or more", self.max_shift)
        require(self.eval_shift >= 0, "eval_shift", "0 or more", self.eval_shift)


class ShapePositional(SinusoidalPositional):
    """x_t + PE(t + k) with PE the sinusoidal table; in training k ~ U{0, ..., K} is drawn for
    every sequence of the batch, and independently by the encoder and the decoder (each stack
    has its own module, as in the authors' released OpenNMT code); at evaluation k = ``eval_shift``
    (default 0, so the model is exactly ``sinusoidal`` there).

    The random offset makes absolute positions useless to the model, so it learns to rely on
    what is shift-invariant (PE(t + k) . PE(t' + k) depends on t - t' only): relative positions
    at the cost of absolute ones, with no change to attention. The authors' code decodes with
    k = K instead of 0 (``eval_shift: K`` reproduces it); the paper's K values for WMT are
    among 10–500 (its released configs: 10, 20, 30 for the length-extrapolation setting, 40,
    100, 500 otherwise). Offsets come from the default generator of the batch's device, which
    the run's seed sets and a checkpoint restores (exact resume).
    """

    card = SchemeCard(
        title="SHAPE",
        summary=("sinusoidal at t + k, k ~ U{0..`shape.max_shift`} per sequence in training (encoder and decoder "
        "apart), k = `shape.eval_shift` (0) at evaluation"),
        paper="kiyono",
        export_form="embeddings",
        cross_attention="absent",
    )

    # sinusoidal at t + eval_shift in evaluation: embedding_table reads it off embed (inherited form)

    Options = ShapeOptions

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg)
        self.max_shift = cfg.positional.shape.max_shift
        self.eval_shift = cfg.positional.shape.eval_shift

    def offsets(self, batch: int, device: torch.device) -> torch.Tensor:
        """(batch, 1) training offsets, uniform over 0..K."""
        return torch.randint(0, self.max_shift + 1, (batch, 1), device=device)

    def embed(self, x, pos):
        if self.training:
            shifted = pos[None, :] + self.offsets(x.size(0), x.device)  # (B, T)
        else:
            shifted = pos + self.eval_shift  # (T,)
        return super().embed(x, shifted)
