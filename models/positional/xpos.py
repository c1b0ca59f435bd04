"""xPos: rotary embedding with exponential decay (Sun et al. 2022, "A Length-Extrapolatable
Transformer", eq. 6)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.positional.card import SchemeCard
from models.positional.rotary import RotaryPositional
from utils.config import require


@dataclass
class XPosOptions:
    """``model.positional.xpos``."""

    base: float = 10000.0  # the rotation's frequency base, as rope.base
    scale_base: float = 512.0  # zeta^(n / scale_base)
    gamma: float = 0.4  # zeta_i = (2i/d_head + gamma) / (1 + gamma)

    def __post_init__(self) -> None:
        require(self.base > 1, "base", "greater than 1 (else every frequency is 1)", self.base)
        require(self.scale_base > 0, "scale_base", "positive", self.scale_base)
        require(self.gamma > 0, "gamma", "positive (zeta_0 = gamma / (1 + gamma) must not be 0)", self.gamma)


class XPosPositional(RotaryPositional):
    """q_n <- R(n) q_n * zeta^(n/B), k_m <- R(m) k_m * zeta^(-m/B), so that
    q_n . k_m = f(n - m) decays like zeta^((n - m)/B) for n > m,

    zeta_i = (2i/Dh + gamma) / (1 + gamma) per rotated pair, B = ``scale_base``. The paper
    targets causal language models; in the bidirectional encoder keys after the query get the
    mirrored factor zeta^(-(m - n)/B) > 1, which we keep (no blockwise masking).
    """

    card = SchemeCard(
        title="xPos",
        relative=True,
        summary="rotary with exponential decay ζ^((n−m)/B)",
        paper="sun",
        deviation=("the paper is causal; in the encoder keys after the query get the mirrored factor (no blockwise "
        "masking)"),
        profile_label="rotated q · k for constant q, k (1 at d = 0)",
        scales_frequencies=True,
    )

    Options = XPosOptions

    def __init__(self, kind, cfg):
        section = cfg.positional.xpos
        super().__init__(kind, cfg, base=section.base)
        self.scale_base = section.scale_base
        zeta = (torch.arange(0, self.d_head, 2, dtype=torch.float32) / self.d_head + section.gamma) / (
            1 + section.gamma
        )
        self.register_buffer("zeta", zeta, persistent=False)

    def _scale(self, pos: torch.Tensor) -> torch.Tensor:
        """(T, Dh) factor zeta^(pos/B), repeated for both members of each pair."""
        power = pos.to(torch.float32)[:, None] / self.scale_base
        return (self.zeta[None, :] ** power).repeat_interleave(2, dim=-1)

    def rotate(self, q, k, q_pos, k_pos):
        q, k = super().rotate(q, k, q_pos, k_pos)  # frequency scaling rescales the rotation, not zeta
        return (q * self._scale(q_pos).to(q.dtype), k / self._scale(k_pos).to(k.dtype))
