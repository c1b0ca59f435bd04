"""Relative position representations (Shaw, Uszkoreit & Vaswani 2018, "Self-Attention with
Relative Position Representations", eqs. 3-5)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.positional.base import DistanceProfile, PositionalEncoding, relative_positions
from models.positional.card import SchemeCard
from utils.config import require


@dataclass
class ShawOptions:
    """``model.positional.shaw``: relative distances clipped to [-max_distance, max_distance]."""

    max_distance: int = 16  # relative distances clipped to [-k, k]
    values: bool = True  # also add the value-side term a^V_ij

    def __post_init__(self) -> None:
        require(self.max_distance >= 1, "max_distance", "at least 1", self.max_distance)


class ShawPositional(PositionalEncoding):
    """e_ij = q_i . (k_j + a^K_ij) / sqrt(Dh),  z_i = sum_j alpha_ij (v_j + a^V_ij),
    a^K_ij = w^K[clip(j - i, -k, k)], a^V_ij = w^V[clip(j - i, -k, k)], tables (2k+1, Dh).

    The tables are shared by the heads (as in the paper) and, unlike the paper, by all layers
    of a stack. ``values: false`` drops the value-side term.
    """

    card = SchemeCard(
        title="Shaw's relative positions",
        relative=True,
        summary="learned relative key/value embeddings clipped at `shaw.max_distance`",
        paper="shaw",
        export_form="relative_position",
        profile_label="cosine(a^K(d), a^K(0))",
        saturation=lambda cfg: f"relative distances clip at ±{cfg.positional.shaw.max_distance}",
        profile=lambda pe, max_distance, query: relative_key_profile(pe, max_distance, query),
    )

    Options = ShawOptions

    def __init__(self, kind, cfg, section=None):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        section = section or cfg.positional.shaw
        self.max_distance = section.max_distance
        self.has_value_term = section.values
        self._make_tables(2 * self.max_distance + 1, self.d_head, section.values)

    def _make_tables(self, n: int, dim: int, values: bool) -> None:
        """Set ``key_table`` and ``value_table`` (n, dim): learned here, fixed in NEZHA."""
        self.key_table = nn.Parameter(torch.randn(n, dim) * dim ** -0.5)
        self.value_table = nn.Parameter(torch.randn(n, dim) * dim ** -0.5) if values else None

    def table_index(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """(Tq, Tk) row of the table for each (query, key) pair."""
        rel = relative_positions(q_pos, k_pos)
        return rel.clamp(-self.max_distance, self.max_distance) + self.max_distance

    def score_bias(self, q, k, q_pos, k_pos):
        index = self.table_index(q_pos, k_pos)  # (Tq, Tk)
        per_distance = torch.matmul(q, self.key_table.to(q.dtype).t())  # (B, H, Tq, 2k+1)
        b, h, tq, _ = per_distance.shape
        bias = per_distance.gather(-1, index.expand(b, h, tq, -1))
        return bias * (self.d_head * self.score_scale) ** -0.5

    def value_term(self, probs, q_pos, k_pos):
        if not self.has_value_term:
            return None
        index = self.table_index(q_pos, k_pos).expand_as(probs)
        n = self.value_table.size(0)
        per_distance = probs.new_zeros(*probs.shape[:-1], n).scatter_add_(-1, index, probs)
        return torch.matmul(per_distance, self.value_table.to(probs.dtype))  # (B, H, Tq, Dh)


@torch.no_grad()
def relative_key_profile(pe: ShawPositional, max_distance: int, query: int) -> DistanceProfile:
    """Cosine similarity of the relative key embedding a^K at offset d with the one at offset 0:
    the position signal a query can read (the score itself depends on the content)."""
    offsets = torch.arange(-max_distance, max_distance + 1)
    rows = pe.key_table[pe.table_index(torch.tensor([query]), (query + offsets).clamp(min=0))[0]]
    sim = torch.nn.functional.cosine_similarity(rows, pe.key_table[pe.max_distance][None], dim=-1)
    return DistanceProfile(offsets, sim[None].float(), type(pe).card.profile_label)
