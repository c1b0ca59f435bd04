"""Learned absolute position embeddings (BERT, Devlin et al. 2019; GPT-2, Radford et al. 2019)."""
from __future__ import annotations

from torch import nn

from models.positional.base import PositionalEncoding
from utils.errors import UserError


class LearnablePositional(PositionalEncoding):
    """x + P[pos] with P a trained (max_positions, D) table, initialised N(0, 0.02).

    A position past the table is an error naming the maximum (no silent wrap-around); raise
    ``model.positional.max_positions`` or cut the input.
    """

    acts_in_cross_attention = False

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.table = nn.Embedding(cfg.positional.max_positions, cfg.d_model)
        nn.init.normal_(self.table.weight, 0.0, 0.02)

    def embed(self, x, pos):
        if len(pos) and int(pos.max()) >= self.table.num_embeddings:
            raise UserError(
                f"position {int(pos.max())} is past the learnable position table "
                f"(max_positions={self.table.num_embeddings}, positions 0..{self.table.num_embeddings - 1}); "
                f"raise model.positional.max_positions or shorten the input")
        return x + self.table(pos).to(x.dtype)
