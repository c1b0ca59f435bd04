"""p-RoPE: rotary positions on the highest frequencies only (Barbero et al. 2025, ICLR, "Round and
Round We Go! What makes Rotary Positional Encodings useful?", §6)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.positional.card import SchemeCard
from models.positional.rotary import RotaryPositional, kept_frequencies
from utils.config import require


@dataclass
class PartialRotaryOptions:
    """``model.positional.p_rope``."""

    p: float = 0.75  # fraction of RoPE's Dh/2 frequencies kept rotated (the highest); 0: NoPE, 1: RoPE
    base: float = 10000.0  # theta_i = base^(-2i/d_head), as rope.base
    # HoPE's rule (Chen et al. 2025) in place of p: keep the frequencies that complete a period within
    # L positions (theta_i >= 2 pi / L, the training length), the others position-independent; 0: p decides
    train_length: int = 0

    def __post_init__(self) -> None:
        require(0 <= self.p <= 1, "p", "in [0, 1] (the fraction of frequencies kept)", self.p)
        require(self.base > 1, "base", "greater than 1 (else every frequency is 1)", self.base)
        require(self.train_length >= 0, "train_length", "0 (p decides) or more (HoPE's rule)", self.train_length)


def rotated_pairs(options: PartialRotaryOptions, d_head: int) -> int:
    """How many of the Dh/2 rotary pairs p-RoPE keeps rotated, the highest frequencies (pairs 0, 1, ...;
    theta_i = base^(-2i/Dh) falls with i): round(p Dh/2), or with ``train_length`` L HoPE's count of
    the frequencies with at least one period in L positions."""
    if options.train_length:
        return kept_frequencies(d_head, options.base, options.train_length)
    return round(options.p * (d_head // 2))


HOPE = (
    "with `p_rope.train_length: L` it is HoPE (Chen et al. 2025, ACL, arXiv 2410.21216): RoPE's low-frequency "
    "components, too slow to turn through a full period over the distances d < L a model trains on (the paper finds "
    "such components shape the U-shaped attention it blames for poor extrapolation), replaced by "
    "position-independent ones, the high frequencies kept. The suite keeps θ_i ≥ 2π/L (at least one full period "
    "within L positions, FoPE's clip floor too); a pair left unrotated is exactly p-RoPE's position-independent channel, so HoPE is p-RoPE with "
    "p = K/(Dh/2), K read off L. The paper's own threshold was not checked against its text offline")


class PartialRotaryPositional(RotaryPositional):
    """RoPE whose lowest frequencies are removed: pair i of each head is rotated by m theta_i
    (theta_i = base^(-2i/Dh), RoPE's own frequencies, not respread) for the round(p Dh/2) highest
    frequencies i < round(p Dh/2), and left as it is (angle 0) for the others.

    The paper's convention: p is the fraction of frequencies kept, so 0-RoPE is NoPE and 1-RoPE is
    RoPE; the unrotated channels carry content that no distance can rotate away (its argument for
    removing the lowest, "semantic", frequencies); its Gemma experiments use p = 0.75. HoPE (Chen et
    al. 2025, "HoPE: A Novel Positional Encoding Without Long-Term Decay") is the same cut chosen by
    the training length L instead (``p_rope.train_length``): a frequency without one full period in L
    positions (theta_i < 2 pi / L) is made position-independent, as FoPE's clip floor. The rotation
    itself is rope's (``rotary.rotate_pairs``). Cross-attention: refused (source and target positions
    are not aligned); there it sees the plain dot product.
    """

    card = SchemeCard(
        title="p-RoPE",
        relative=True,
        summary=("rotary on the round(p·Dh/2) highest frequencies only, `p_rope.p` (0: NoPE, 1: RoPE); with "
                 "`p_rope.train_length` L on those with a period within L positions (HoPE)"),
        paper="barbero",
        profile_label="rotated q · k for constant q, k (1 at d = 0)",
        cross_attention="refused",
        scales_frequencies=True,
        reductions=HOPE,
        kind="2024–25",
    )

    Options = PartialRotaryOptions

    def __init__(self, kind, cfg):
        options = cfg.positional.p_rope
        super().__init__(kind, cfg, base=options.base)
        kept = rotated_pairs(options, self.d_head)
        self.register_buffer("kept", torch.arange(self.d_head // 2) < kept, persistent=False)

    def _angles(self, pos, length_factor):
        return super()._angles(pos, length_factor) * self.kept  # 0 where not rotated
