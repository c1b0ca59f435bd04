"""ALiBi: attention with linear biases (Press et al. 2022, "Train Short, Test Long")."""
from __future__ import annotations

import math

import torch

from models.positional.base import PositionalEncoding, relative_positions
from models.positional.card import SchemeCard


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """(n_heads,) slopes: the geometric sequence 2^(-8/n), 2^(-16/n), ... for a power of two n;
    otherwise the slopes of the closest smaller power of two, then every other slope of twice
    that power (the paper's rule, §3)."""

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = power_of_two(closest)
    if closest < n_heads:
        slopes += power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBiPositional(PositionalEncoding):
    """bias[h, i, j] = -m_h |j - i|, no position embeddings.

    The decoder's causal mask hides j > i, so there it is the paper's -m_h (i - j); in the
    encoder (bidirectional) the distance is symmetric, as in the paper's encoder-decoder note.
    """

    card = SchemeCard(
        title="ALiBi",
        relative=True,
        summary="−m_h·\\|j−i\\| bias, the paper's slopes for any head count",
        paper="press",
        deviation="the paper is causal; the encoder's distance is symmetric, -m_h |j - i|",
    )
    bias_from_positions = True  # FlexAttention adds it from its (H, Tq, Tk) table

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.register_buffer("slopes", alibi_slopes(cfg.n_heads), persistent=False)

    def score_bias(self, q, k, q_pos, k_pos):
        distance = relative_positions(q_pos, k_pos).abs().to(self.slopes.dtype)  # (Tq, Tk)
        return (-self.slopes[:, None, None] * distance)[None]  # (1, H, Tq, Tk)
