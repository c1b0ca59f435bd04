"""FIRE: functional interpolation for relative positions (Li et al. 2023, "Functional
Interpolation for Relative Positions Improves Long Context Transformers", eq. 5)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.positional.base import PositionalEncoding, relative_positions
from models.positional.card import SchemeCard
from utils.config import require


@dataclass
class FireOptions:
    """``model.positional.fire``."""

    hidden: int = 32  # width of the MLP f_theta
    c_init: float = 0.1  # psi(x) = log(c x + 1)
    threshold_init: float = 512.0  # L in max(L, i)

    def __post_init__(self) -> None:
        require(self.hidden >= 1, "hidden", "at least 1", self.hidden)
        require(self.c_init > 0, "c_init", "positive (psi(x) = log(c x + 1) must grow)", self.c_init)
        require(self.threshold_init > 0, "threshold_init", "positive (psi(L) divides)", self.threshold_init)


class FirePositional(PositionalEncoding):
    """bias[h, i, j] = f_theta( psi(i - j) / psi(max(L, i)) )_h,  psi(x) = log(c x + 1),

    f_theta an MLP 1 -> hidden -> H (ReLU), c and L learned through their logarithms (so they
    stay positive and keep a gradient), initialised from the config.
    The paper is causal (i >= j); for the bidirectional encoder we feed the signed value
    sign(i - j) psi(|i - j|) / psi(max(L, i)) so the MLP can tell left from right.
    Positions are 0-based, so max(L, i) uses i + 1 to keep the normaliser positive at i = 0.
    """

    card = SchemeCard(
        title="FIRE",
        summary="MLP of log-scaled, length-normalised distance, learned c and L",
        paper="li",
        deviation=("the paper is causal; the encoder feeds the MLP the signed distance, and max(L, i + 1) for "
        "0-based i"),
    )
    bias_from_positions = True  # FlexAttention adds it from its (H, Tq, Tk) table

    Options = FireOptions

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        section = cfg.positional.fire
        self.mlp = nn.Sequential(nn.Linear(1, section.hidden), nn.ReLU(), nn.Linear(section.hidden, cfg.n_heads))
        self.log_c = nn.Parameter(torch.tensor(float(section.c_init)).log())
        self.log_threshold = nn.Parameter(torch.tensor(float(section.threshold_init)).log())

    def _psi(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(self.log_c.exp() * x + 1)

    def score_bias(self, q, k, q_pos, k_pos):
        distance = -relative_positions(q_pos, k_pos).to(torch.float32)  # (Tq, Tk): i - j
        query = (q_pos.to(torch.float32) + 1)[:, None]
        normaliser = self._psi(torch.maximum(self.log_threshold.exp(), query))
        x = torch.sign(distance) * self._psi(distance.abs()) / normaliser
        x = x[..., None].to(self.mlp[0].weight.dtype)
        return self.mlp(x).permute(2, 0, 1)[None].to(q.dtype)  # (1, H, Tq, Tk)
