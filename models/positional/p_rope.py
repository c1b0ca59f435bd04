"""p-RoPE: rotary positions on the highest frequencies only (Barbero et al. 2025, ICLR, "Round and
Round We Go! What makes Rotary Positional Encodings useful?", §6)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.positional.card import SchemeCard
from models.positional.rotary import RotaryPositional
from utils.config import require


@dataclass
class PartialRotaryOptions:
    """``model.positional.p_rope``."""

    p: float = 0.75  # fraction of RoPE's Dh/2 frequencies kept rotated (the highest); 0: NoPE, 1: RoPE
    base: float = 10000.0  # theta_i = base^(-2i/d_head), as rope.base

    def __post_init__(self) -> None:
        require(0 <= self.p <= 1, "p", "in [0, 1] (the fraction of frequencies kept)", self.p)
        require(self.base > 1, "base", "greater than 1 (else every frequency is 1)", self.base)


def rotated_pairs(p: float, d_head: int) -> int:
    """How many of the Dh/2 rotary pairs p-RoPE keeps rotated: round(p Dh/2), the highest frequencies
    (pairs 0, 1, ...; theta_i = base^(-2i/Dh) falls with i)."""
    return round(p * (d_head // 2))


class PartialRotaryPositional(RotaryPositional):
    """RoPE whose lowest frequencies are removed: pair i of each head is rotated by m theta_i
    (theta_i = base^(-2i/Dh), RoPE's own frequencies, not respread) for the round(p Dh/2) highest
    frequencies i < round(p Dh/2), and left as it is (angle 0) for the others.

    The paper's convention: p is the fraction of frequencies kept, so 0-RoPE is NoPE and 1-RoPE is
    RoPE; the unrotated channels carry content that no distance can rotate away (its argument for
    removing the lowest, "semantic", frequencies); its Gemma experiments use p = 0.75. The rotation
    itself is rope's (``rotary.rotate_pairs``). Cross-attention: refused (source and target positions
    are not aligned); there it sees the plain dot product.
    """

    card = SchemeCard(
        summary="rotary on the round(p·Dh/2) highest frequencies only, `p_rope.p` (0: NoPE, 1: RoPE)",
        paper="Barbero et al. 2025",
        profile_label="rotated q · k for constant q, k (1 at d = 0)",
        cross_attention="refused",
        scales_frequencies=True,
    )

    Options = PartialRotaryOptions

    def __init__(self, kind, cfg):
        options = cfg.positional.p_rope
        super().__init__(kind, cfg, base=options.base)
        kept = rotated_pairs(options.p, self.d_head)
        self.register_buffer("kept", torch.arange(self.d_head // 2) < kept, persistent=False)

    def _angles(self, pos, length_factor):
        return super()._angles(pos, length_factor) * self.kept  # 0 where not rotated
