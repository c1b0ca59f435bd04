"""PoPE, polar coordinate position embeddings (Gopalakrishnan, Csordás, Schmidhuber and Mozer
2025, arXiv 2509.10534, "Decoupling the 'What' and 'Where' With Polar Coordinate Positional
Embeddings") — not the Legendre-polynomial "PoPE" of arXiv 2405.04585, hence the name ``polar``."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from models.positional.base import PositionalEncoding
from models.positional.card import SchemeCard
from models.positional.frequency_scaling import frequency_scaling
from utils.config import require


@dataclass
class PolarOptions:
    """``model.positional.polar``."""

    base: float = 10000.0  # theta_c = base^(-c/d_head), c = 0 .. d_head - 1

    def __post_init__(self) -> None:
        require(self.base > 1, "base", "greater than 1 (else every frequency is 1)", self.base)


def polar_frequencies(d_head: int, base: float, device=None) -> torch.Tensor:
    """(Dh,) float32 frequencies theta_c = base^(-c/Dh): one per channel, Dh of them (RoPE has Dh/2)."""
    return base ** (-torch.arange(d_head, device=device) / d_head)


class PolarPositional(PositionalEncoding):
    """Content sets a magnitude, position a phase, per channel c of each head:

        score(t, s) = sum_c mu_q,c(t) mu_k,c(s) cos((t - s) theta_c + delta_h,c),
        mu = softplus(q) and softplus(k) >= 0,  theta_c = base^(-c/Dh),

    t the query's position, s the key's, delta a learned phase bias per head and channel, clamped to
    [-2 pi, 0] (initialised at 0). Computed as a dot product of real vectors: a query becomes
    [mu cos(t theta), mu sin(t theta)] and a key [mu cos(s theta - delta), mu sin(s theta - delta)],
    2 Dh wide (``rotate`` widens them; the cache holds the widened keys), scaled by 1/sqrt(Dh) like
    every score. Unlike RoPE no channel pairs mix content with position: a query cannot move its
    best key by its content's phase. Cross-attention: refused; there the plain dot product.
    """

    card = SchemeCard(
        title="PoPE",
        relative=True,
        summary="softplus magnitudes from content, phases (t−s)θ_c + δ_c from position, Dh frequencies (PoPE)",
        paper="gopalakrishnan",
        cross_attention="refused",
        scales_frequencies=True,
        kind="2024–25",
    )

    Options = PolarOptions

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.base = cfg.positional.polar.base
        self.phase_bias = nn.Parameter(torch.zeros(cfg.n_heads, self.d_head))
        self.frequency_scaling = frequency_scaling(cfg, kind)

    def _angles(self, pos: torch.Tensor, length_factor: torch.Tensor | None) -> torch.Tensor:
        """(T, Dh) float32 phases pos * theta_c, or (B, 1, T, Dh) with each sentence's frequencies
        rescaled (``frequency_scaling``: exponents c/Dh, so NTK's base is base * s^(Dh / (Dh - 1)))."""
        if self.frequency_scaling is None or length_factor is None:
            return pos[:, None] * polar_frequencies(self.d_head, self.base, pos.device)
        exponents = torch.arange(self.d_head, device=pos.device) / self.d_head
        return self.frequency_scaling.angles(pos, self.base, exponents, length_factor)[:, None]

    def rotate(self, q, k, q_pos, k_pos):
        """q: (B, H, Tq, Dh), k: (B, H, Tk, Dh) -> (B, H, Tq, 2 Dh), (B, H, Tk, 2 Dh)."""
        length_factor = self.length_factor
        delta = self.phase_bias.float().clamp(-2 * math.pi, 0.0)[:, None, :]  # (H, 1, Dh)
        q_phase = self._angles(q_pos, length_factor)  # (Tq, Dh) or (B, 1, Tq, Dh)
        k_phase = self._angles(k_pos, length_factor) - delta  # (H, Tk, Dh) or (B, H, Tk, Dh)
        mu_q, mu_k = F.softplus(q.float()), F.softplus(k.float())
        if q_phase.dim() == 4:  # YaRN's temperature: both magnitudes times sqrt(1/t)
            magnitude = self.frequency_scaling.magnitude(length_factor)[:, None, None, None]
            mu_q, mu_k = mu_q * magnitude, mu_k * magnitude
        q = torch.cat((mu_q * q_phase.cos(), mu_q * q_phase.sin()), dim=-1).to(q.dtype)
        k = torch.cat((mu_k * k_phase.cos(), mu_k * k_phase.sin()), dim=-1).to(k.dtype)
        return q, k
