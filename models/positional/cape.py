"""CAPE: continuous augmented positional embeddings (Likhomanenko et al. 2021, NeurIPS, "CAPE:
Encoding Relative Positions with Continuous Augmented Positional Embeddings")."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from models.positional.card import SchemeCard
from models.positional.sinusoidal import SinusoidalPositional
from utils.config import require


@dataclass
class CapeOptions:
    """``model.positional.cape``: the text (machine translation) setting by default."""

    max_global_shift: float = 5.0  # Delta ~ U[-G, G] per sequence
    max_local_shift: float = 1.0  # epsilon_t ~ U[-E/2, E/2] per position (E <= 1 keeps the order)
    max_global_scaling: float = 1.03  # log lambda ~ U[-log S, log S] per sequence

    def __post_init__(self) -> None:
        require(self.max_global_shift >= 0, "max_global_shift", "0 or more", self.max_global_shift)
        require(self.max_local_shift >= 0, "max_local_shift", "0 or more", self.max_local_shift)
        require(self.max_global_scaling >= 1, "max_global_scaling", "1 or more", self.max_global_scaling)


class CapePositional(SinusoidalPositional):
    """x_t + PE(t') with PE the sinusoidal features of a continuous position; in training
    t' = lambda (t + Delta + epsilon_t) with, for every sequence, a global shift Delta ~ U[-G, G]
    and a global scaling lambda = exp(u), u ~ U[-log S, log S], and, for every position, a local
    shift epsilon_t ~ U[-E/2, E/2]; at evaluation t' = t (exactly ``sinusoidal``).

    Shifts teach the model that only differences of positions carry information (as SHAPE
    does), the scaling that they do so up to a small stretch, and the jitter that positions are
    not exact integers: together a relative, slightly scale-tolerant code with no change to
    attention. Defaults are the text setting (G = 5, E = 1, S = 1.03), the values used for the
    paper's machine-translation models as given by its public PyTorch port; no mean-centering
    of positions (the paper uses it for audio and images). Draws come from the default generator
    of the batch's device (seeded by the run, restored on resume).
    """

    card = SchemeCard(
        title="CAPE",
        summary=("sinusoidal features of continuous positions, in training shifted (±`max_global_shift` per "
        "sequence), jittered (±`max_local_shift`/2 per token) and scaled (×`max_global_scaling`^±1); "
        "plain at evaluation"),
        paper="likhomanenko",
        export_form="embeddings",
        cross_attention="absent",
    )

    # exactly sinusoidal at evaluation (inherited form)

    Options = CapeOptions

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg)
        options = cfg.positional.cape
        self.max_global_shift = options.max_global_shift
        self.max_local_shift = options.max_local_shift
        self.log_scaling = math.log(options.max_global_scaling)

    def augmented(self, pos: torch.Tensor, batch: int) -> torch.Tensor:
        """(batch, T) float64 training positions lambda (pos + Delta + epsilon)."""
        device, t = pos.device, pos.numel()

        def uniform(shape, half_width):
            return (torch.rand(shape, dtype=torch.float64, device=device) * 2 - 1) * half_width

        delta = uniform((batch, 1), self.max_global_shift)
        epsilon = uniform((batch, t), self.max_local_shift / 2)
        scale = uniform((batch, 1), self.log_scaling).exp()
        return (pos.to(torch.float64)[None, :] + delta + epsilon) * scale

    def embed(self, x, pos):
        positions = self.augmented(pos, x.size(0)) if self.training else pos
        return super().embed(x, positions)
