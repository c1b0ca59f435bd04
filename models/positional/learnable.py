"""Learned absolute position embeddings (BERT, Devlin et al. 2019; GPT-2, Radford et al. 2019)."""
from __future__ import annotations

from torch import nn

from models.positional.base import PositionalEncoding
from models.positional.card import SchemeCard


class LearnablePositional(PositionalEncoding):
    """x + P[pos] with P a trained (max_positions, D) table, initialised N(0, 0.02).

    ``position_limit`` is the table's size: the model refuses longer inputs before embedding
    them (``Transformer.positions``: one error naming the maximum, no silent wrap-around).
    """

    card = SchemeCard(
        title="learned absolute positions",
        summary="learned absolute table (`max_positions` is a hard limit)",
        paper="devlin",
        export_form="embeddings",
        cross_attention="absent",
        saturation=lambda cfg: f"a table of {cfg.positional.max_positions} positions, those past the training lengths untrained",
    )

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.table = nn.Embedding(cfg.positional.max_positions, cfg.d_model)
        nn.init.normal_(self.table.weight, 0.0, 0.02)

    @property
    def position_limit(self) -> int:
        return self.table.num_embeddings

    def embed(self, x, pos):
        return x + self.table(pos).to(x.dtype)
