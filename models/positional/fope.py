"""FoPE, Fourier position embedding (Hua et al. 2025, ICML, "Fourier Position Embedding: Enhancing
Attention's Periodic Extension for Length Generalization", §4)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from models.positional.card import SchemeCard
from models.positional.rotary import RotaryPositional, kept_frequencies, rotary_exponents
from utils.config import require


@dataclass
class FourierOptions:
    """``model.positional.fope``."""

    base: float = 10000.0  # omega_i = base^(-2i/d_head), as rope.base
    sigma: float = 0.3  # the harmonics' coefficients start ~ N(0, sigma^2 / K) beside the dominant 1 (K: kept frequencies)
    # L: a frequency with fewer than one period in L positions (omega_i < 2 pi / L) is under-trained and
    # zeroed (its pair left unrotated); 0: every frequency kept. The study sets it to its training length.
    train_length: int = 0

    def __post_init__(self) -> None:
        require(self.base > 1, "base", "greater than 1 (else every frequency is 1)", self.base)
        require(self.sigma >= 0, "sigma", "0 or more", self.sigma)
        require(self.train_length >= 0, "train_length", "0 (keep every frequency) or more", self.train_length)


class FourierPositional(RotaryPositional):
    """Each rotary pair d < K of head h is turned by a Fourier series over the K kept frequencies
    instead of one: (x1 C - x2 S, x1 S + x2 C) at position n with

        C_{h,d}(n) = sum_k c_{h,k,d} cos(omega_k n),   S_{h,d}(n) = sum_k s_{h,k,d} sin(omega_k n),

    the coefficients learned, starting at the identity (RoPE's own frequency dominant) plus
    N(0, sigma^2 / K) harmonics, the paper's model of the spectrum damage that linear layers and
    activations cause; the pairs d >= K, whose frequencies complete no period within the training
    length (Clip Floor to Zero), get frequency zero: C = 1, S = 0, left as they are. The coefficients
    are per head and shared by a stack's layers. With sigma = 0 and train_length = 0 it starts as RoPE
    (its coefficients still learn). Cross-attention: refused (source and target positions are not
    aligned), as for the other schemes of 2024-25.
    """

    card = SchemeCard(
        title="FoPE",
        summary=("each rotary pair a Fourier series over the kept frequencies (learned coefficients per head, "
                 "RoPE's own dominant at the start, harmonics ~ `fope.sigma`); frequencies under one period in "
                 "`fope.train_length` positions zeroed"),
        paper="hua",
        deviation="the coefficients are per head and shared by a stack's layers (the paper's are per layer)",
        profile_label="Fourier-series q · k for constant q, k",
        cross_attention="refused",
        kind="2024–25",
    )

    Options = FourierOptions

    def __init__(self, kind, cfg):
        options = cfg.positional.fope
        super().__init__(kind, cfg, base=options.base)
        k = kept_frequencies(self.d_head, options.base, options.train_length)
        self.register_buffer("omega", (options.base ** -rotary_exponents(self.d_head)[:k]).float(), persistent=False)
        spread = options.sigma / math.sqrt(max(k, 1))
        eye = torch.eye(k).expand(self.n_heads, k, k)
        self.cos_coefficients = nn.Parameter(eye + torch.randn(self.n_heads, k, k) * spread)
        self.sin_coefficients = nn.Parameter(eye + torch.randn(self.n_heads, k, k) * spread)

    def _cos_sin(self, pos, length_factor=None):
        """(H, T, Dh/2) the series' C and S in float32 (as rope's cos and sin, whatever the model's dtype
        or autocast): the kept pairs mixed per head, the others C = 1, S = 0."""
        angles = pos.to(torch.float32)[:, None] * self.omega.float()  # (T, K)
        # products and a sum rather than a matmul, which autocast would run in bf16: (H, T, K, K) -> (H, T, K)
        cos = (angles.cos()[None, :, :, None] * self.cos_coefficients.float()[:, None]).sum(-2)
        sin = (angles.sin()[None, :, :, None] * self.sin_coefficients.float()[:, None]).sum(-2)
        rest = self.d_head // 2 - self.omega.numel()
        return (nn.functional.pad(cos, (0, rest), value=1.0), nn.functional.pad(sin, (0, rest), value=0.0))
