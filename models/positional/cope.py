"""CoPE, contextual position encoding (Golovneva, Wang, Weston and Sukhbaatar 2024, arXiv
2405.18719, "Contextual Position Encoding: Learning to Count What's Important", eq. 3-5)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from models.positional.base import PositionalEncoding, relative_positions
from models.positional.card import SchemeCard
from utils.config import require


@dataclass
class ContextualOptions:
    """``model.positional.cope``."""

    max_positions: int = 64  # P: contextual positions are clamped to P - 1 (the paper's npos_max)

    def __post_init__(self) -> None:
        require(self.max_positions >= 2, "max_positions", "at least 2 (positions 0 and 1 to interpolate)",
                self.max_positions)


class ContextualPositional(PositionalEncoding):
    """Positions counted by the content: gates g_it = sigmoid(q_i . k_t / sqrt(Dh)) (the scaled
    logits, as the authors' code gates them), the key's position relative to query i

        p_ij = sum_{t = j .. i} g_it                    (decoder: the paper's causal form),

    clamped to P - 1, and a logit bias interpolating learned position embeddings e[0..P-1] (Dh wide,
    shared by the heads, zero at initialisation as in the authors' code):

        bias_ij = (1 - w) q_i . e[floor p_ij] + w q_i . e[ceil p_ij],  w = p_ij - floor p_ij,

    (unscaled, as the authors add it to the scaled logits). Deviation, the encoder: the paper defines
    CoPE for causal attention; in bidirectional self-attention we count on both sides, p_ij = sum of
    g_it over t from j to i for j <= i and from i to j for j > i (the same embeddings, so a key as
    far right as another is left gets the same position: direction comes from the content only).
    Right-padded batches keep padding out of every real pair's count. Cross-attention: refused.
    """

    card = SchemeCard(
        title="CoPE",
        relative=True,
        summary="gated counts p_ij = Σ_t σ(q_i·k_t) from key to query, interpolated embeddings on the logits",
        paper="golovneva",
        deviation=("the paper defines CoPE for causal attention; in the encoder the count is two-sided: p_ij sums "
        "the gates from j to i for a key on the left and from i to j for one on the right"),
        cross_attention="refused",
        saturation=lambda cfg: f"contextual positions clamp at {cfg.positional.cope.max_positions - 1}",
        kind="2024–25",
    )

    Options = ContextualOptions

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.table = nn.Parameter(torch.zeros(cfg.positional.cope.max_positions, self.d_head))

    def positions(self, q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """(B, H, Tq, Tk) float32 contextual positions p_ij, clamped to P - 1."""
        gates = torch.sigmoid(torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(self.d_head))
        rel = relative_positions(q_pos, k_pos)  # j - i
        zero = gates.new_zeros(())
        counts = torch.where(rel <= 0, gates, zero).flip(-1).cumsum(-1).flip(-1)  # t from j to i
        if self.bidirectional:
            after = torch.where(rel >= 0, gates, zero).cumsum(-1)  # t from i to j
            counts = torch.where(rel > 0, after, counts)
        return counts.clamp(max=self.table.size(0) - 1)

    def score_bias(self, q, k, q_pos, k_pos):
        p = self.positions(q, k, q_pos, k_pos)
        below = p.floor()
        w = p - below
        at = torch.matmul(q.float(), self.table.float().t())  # (B, H, Tq, P): q_i . e[p] for every integer p
        low = at.gather(-1, below.long())
        high = at.gather(-1, p.ceil().long())
        return low + w * (high - low)
