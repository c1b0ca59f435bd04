"""Disentangled attention (He et al. 2021, "DeBERTa: Decoding-enhanced BERT with Disentangled
Attention", eqs. 2-4)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.positional.base import DistanceProfile, PositionalEncoding, relative_positions
from models.positional.card import SchemeCard
from utils.config import require


@dataclass
class DebertaOptions:
    """``model.positional.deberta``."""

    max_distance: int = 128  # the span k: delta(i, j) clipped to [0, 2k)

    def __post_init__(self) -> None:
        require(self.max_distance >= 1, "max_distance", "at least 1", self.max_distance)


class DebertaPositional(PositionalEncoding):
    """A_ij = Qc_i.Kc_j + Qc_i.Kr_{delta(i,j)} + Kc_j.Qr_{delta(j,i)}, scaled by 1/sqrt(3 Dh),

    delta(i, j) = clip(i - j + k, 0, 2k - 1), Qr = P W_qr and Kr = P W_kr with P a learned
    (2k, D) table of relative embeddings (k = ``max_distance``). This module returns the
    content-to-position and position-to-content terms; ``score_scale = 3`` makes the ordinary
    content term use the same 1/sqrt(3 Dh). Deviation: W_qr and W_kr are shared by the layers
    of a stack (the paper shares P across layers but projects it in each layer).
    """

    card = SchemeCard(
        title="DeBERTa",
        relative=True,
        summary="content→position and position→content terms, 1/√(3d) scale",
        paper="he",
        profile_label="cosine(K_r(delta), K_r(0)) per head",
        saturation=lambda cfg: f"relative distances clip at ±{cfg.positional.deberta.max_distance}",
        profile=lambda pe, max_distance, query: projected_key_profile(pe, max_distance, query),
    )

    Options = DebertaOptions
    score_scale = 3.0

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.span = cfg.positional.deberta.max_distance
        self.table = nn.Parameter(torch.randn(2 * self.span, cfg.d_model) * 0.02)
        self.w_qr = nn.Linear(cfg.d_model, cfg.d_model)
        self.w_kr = nn.Linear(cfg.d_model, cfg.d_model)

    def delta(self, a_pos: torch.Tensor, b_pos: torch.Tensor) -> torch.Tensor:
        """(Ta, Tb) clip(a - b + k, 0, 2k - 1)."""
        return (-relative_positions(a_pos, b_pos) + self.span).clamp(0, 2 * self.span - 1)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(-1, self.n_heads, self.d_head).transpose(0, 1)  # (H, 2k, Dh)

    def score_bias(self, q, k, q_pos, k_pos):
        table = self.table.to(q.dtype)
        k_r, q_r = self.heads(self.w_kr(table)), self.heads(self.w_qr(table))
        b, h, tq, _ = q.shape
        tk = k.size(2)
        if 2 * tq * tk < 2 * self.span * (tq + tk):
            # fewer (query, key) pairs than table rows times positions: score each pair against
            # its own row (sentences much shorter than the span, decoding steps)
            c2p = _pairwise(q, k_r[:, self.delta(q_pos, k_pos)])  # (B, H, Tq, Tk)
            p2c = _pairwise(k, q_r[:, self.delta(k_pos, q_pos)]).transpose(-1, -2)
        else:  # every position against the whole table, then each pair's entry
            c2p = torch.matmul(q, k_r.transpose(-1, -2))  # (B, H, Tq, 2k)
            c2p = c2p.gather(-1, self.delta(q_pos, k_pos).expand(b, h, tq, tk))
            p2c = torch.matmul(k, q_r.transpose(-1, -2))  # (B, H, Tk, 2k)
            p2c = p2c.gather(-1, self.delta(k_pos, q_pos).expand(b, h, tk, tq)).transpose(-1, -2)
        return (c2p + p2c) * (self.d_head * self.score_scale) ** -0.5


def _pairwise(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """x (B, H, Tx, Dh), rows (H, Tx, Ty, Dh) -> (B, H, Tx, Ty): x[b, h, i] . rows[h, i, j], one
    product per head and position over the batch."""
    return torch.matmul(x.permute(1, 2, 0, 3), rows.transpose(-1, -2)).permute(2, 0, 1, 3)


@torch.no_grad()
def projected_key_profile(pe: DebertaPositional, max_distance: int, query: int) -> DistanceProfile:
    """Per head, cosine similarity of the projected relative key K_r at offset d with K_r at
    offset 0 (the position signal of the content-to-position term)."""
    offsets = torch.arange(-max_distance, max_distance + 1)
    k_r = pe.heads(pe.w_kr(pe.table))  # (H, 2k, Dh)
    index = pe.delta(torch.tensor([query]), (query + offsets).clamp(min=0))[0]
    sim = torch.nn.functional.cosine_similarity(k_r[:, index], k_r[:, pe.span][:, None], dim=-1)
    return DistanceProfile(offsets, sim.float(), type(pe).card.profile_label)

