"""KERPLE, logarithmic variant (Chi et al. 2022, NeurIPS, "KERPLE: Kernelized Relative
Positional Embedding for Length Extrapolation", eq. for the log kernel)."""
from __future__ import annotations

import torch
from torch import nn

from models.positional.alibi import alibi_slopes
from models.positional.base import PositionalEncoding, relative_positions
from models.positional.card import SchemeCard

MIN_PARAMETER = 1e-2  # r1, r2 are kept at least this (the paper constrains both to be positive)


class KerplePositional(PositionalEncoding):
    """bias[h, i, j] = -r1_h log(1 + r2_h |j - i|) with learned r1_h, r2_h > 0 per head.

    The log kernel is conditionally positive definite, so the bias is a valid (shifted) kernel
    on distances: like ALiBi it decays with distance, but logarithmically, so far keys are not
    driven to zero weight, and each head learns how strongly (r1) and from which distance (r2)
    it discounts. Positivity: the parameters are clamped at ``MIN_PARAMETER`` where they are
    used (the paper projects them after each update; the clamp gives the same values and no
    gradient below the bound). Initialisation (ours; deterministic): r1 = 1 and r2 = ALiBi's
    geometric slopes, so that heads start with different ranges. Symmetric |j - i| in the
    encoder; the decoder's causal mask leaves the paper's j <= i.
    """

    card = SchemeCard(
        title="KERPLE",
        relative=True,
        summary="−r1_h·log(1 + r2_h·\\|j−i\\|) with learned r1, r2 > 0 per head",
        paper="chi",
    )
    bias_from_positions = True  # FlexAttention adds it from its (H, Tq, Tk) table

    def __init__(self, kind, cfg):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.r1 = nn.Parameter(torch.ones(cfg.n_heads))
        self.r2 = nn.Parameter(alibi_slopes(cfg.n_heads))

    def score_bias(self, q, k, q_pos, k_pos):
        distance = relative_positions(q_pos, k_pos).abs().to(self.r1.dtype)  # (Tq, Tk)
        r1 = self.r1.clamp(min=MIN_PARAMETER)[:, None, None]
        r2 = self.r2.clamp(min=MIN_PARAMETER)[:, None, None]
        return (-r1 * torch.log1p(r2 * distance))[None]  # (1, H, Tq, Tk)
