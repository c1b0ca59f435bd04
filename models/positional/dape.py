"""DAPE, data-adaptive positional encoding (Zheng, Gao, Shi, Xiong, Sun, Li, Yang, Li, Tang and Li
2024, NeurIPS, "DAPE: Data-Adaptive Positional Encoding for Length Extrapolation", eq. 5): an MLP
over the heads that mixes the content logits with a base bias, over ALiBi, KERPLE or FIRE."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from models.positional.base import PositionalEncoding
from models.positional.card import SchemeCard
from models.positional.registry import SCHEMES  # filled by the package before any scheme is built
from utils.config import require


@dataclass
class DapeOptions:
    """``model.positional.dape_<base>``."""

    hidden: int = 32  # width of the MLP f over the 2H inputs of each (i, j) (the paper's D_DAPE)

    def __post_init__(self) -> None:
        require(self.hidden >= 1, "hidden", "at least 1", self.hidden)


class DapePositional(PositionalEncoding):
    """logits = A + B + f([A; B]), per query i and key j,

    A (B, H, Tq, Tk) the content logits q.k / sqrt(Dh), B the base scheme's bias (broadcast over the
    batch), and f an MLP Linear(2H, hidden) -> GELU -> Linear(hidden, H) applied to the 2H values of
    each (i, j): every head's adjustment sees every head's content and position score. ``score_bias``
    returns B + f([A; B]); attention adds A. f acts before the masks, pointwise in (i, j), so masked
    keys never reach a visible one. The base is built as it is alone (its options are its own
    section: ``model.positional.fire`` for ``dape_fire``). Cross-attention: refused.
    """

    base_name: ClassVar[str] = ""
    Options = DapeOptions
    card = SchemeCard(cross_attention="refused")

    @classmethod
    def check_config(cls, cfg) -> None:
        SCHEMES[cls.base_name].check_config(cfg)

    @classmethod
    def registry_name(cls) -> str:
        return f"dape_{cls.base_name}"

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        hidden = cfg.positional.options(self.registry_name()).hidden
        self.base = SCHEMES[self.base_name](kind, cfg)
        self.mix = nn.Sequential(nn.Linear(2 * cfg.n_heads, hidden), nn.GELU(), nn.Linear(hidden, cfg.n_heads))

    def score_bias(self, q, k, q_pos, k_pos):
        content = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d_head)  # A: (B, H, Tq, Tk)
        bias = self.base.score_bias(q, k, q_pos, k_pos).expand_as(content)  # B
        return bias + self.mix(torch.cat((content, bias), dim=1).movedim(1, -1)).movedim(-1, 1)


# Runs only while the module is imported, before mutmut switches a mutant on, so no test could kill
# its mutants: left unmutated. tests/commands/test_docs.py checks the cards through docs/schemes.md.
def _dape_card(title: str, bias: str, relative: bool = True) -> SchemeCard:  # pragma: no mutate block
    """The card of DAPE over the bias ``bias`` (the three differ only in it; over FIRE's bias it is not
    ``relative``: FIRE divides by the query's position)."""
    return SchemeCard(title=title, relative=relative, kind="2024–25",
                      summary=f"A + B + MLP([A; B]) over the heads, B = {bias}", paper="zheng",
                      deviation="the MLP's activation is GELU and it acts on the logits before masking, pointwise in "
                                "(i, j)",
                      cross_attention="refused")


class DapeAlibiPositional(DapePositional):
    card = _dape_card("DAPE-ALiBi", "ALiBi's bias")
    base_name = "alibi"


class DapeKerplePositional(DapePositional):
    card = _dape_card("DAPE-KERPLE", "KERPLE's bias")
    base_name = "kerple"


class DapeFirePositional(DapePositional):
    card = _dape_card("DAPE-FIRE", "FIRE's bias (`fire` options)", relative=False)
    base_name = "fire"
