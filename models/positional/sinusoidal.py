"""Fixed sinusoidal absolute encodings (Vaswani et al. 2017, "Attention Is All You Need", §3.5)."""
from __future__ import annotations

import torch

from models.positional.base import PositionalEncoding
from models.positional.card import SchemeCard


def sinusoidal_table(n_positions: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """(n_positions, dim) table: PE[t, 2i] = sin(t / base^(2i/dim)), PE[t, 2i+1] = cos(same)."""
    return sinusoidal_at(torch.arange(n_positions), dim, base)


def sinusoidal_at(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """The rows of ``sinusoidal_table`` for arbitrary (possibly negative) positions: (..., dim)."""
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim)
    angles = positions.to(torch.float64)[..., None] * inv_freq
    table = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # interleave sin, cos
    return table[..., :dim].to(torch.float32)


class SinusoidalPositional(PositionalEncoding):
    """x + PE[pos] with PE from ``sinusoidal_table``.

    PE(t + k) is a fixed rotation of PE(t) for every k (the paper's motivation), which lets
    attention read relative offsets. The rows are computed from the positions on their device
    at each call (a (T, D) sin/cos, negligible beside one layer): no table to outgrow and no
    read of the positions on the host, which would stall a GPU every step.
    """

    card = SchemeCard(
        title="sinusoidal",
        summary="fixed sin/cos added to embeddings",
        paper="vaswani",
        export_form="embeddings",
        cross_attention="absent",
    )

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)

    def embed(self, x, pos):
        """pos: (T,) or, for the schemes built on this one (shape, cape), (B, T), float or int."""
        return x + sinusoidal_at(pos, self.d_model).to(x.dtype)
