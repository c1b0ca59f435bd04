"""Rotary position embedding, RoPE (Su et al. 2021, "RoFormer", eq. 34)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from models.positional.base import PositionalEncoding
from models.positional.card import SchemeCard
from models.positional.frequency_scaling import frequency_scaling
from utils.config import require


@dataclass
class RotaryOptions:
    """``model.positional.rope``."""

    base: float = 10000.0  # theta_i = base^(-2i/d_head)
    # learn each head's Dh/2 frequencies, starting from theta_i: in one dimension LieRE, ComRoPE,
    # RoPE-Mixed and commuting GRAPE-M are this (docs/schemes.md derives the reduction)
    learn_frequencies: bool = False

    def __post_init__(self) -> None:
        require(self.base > 1, "base", "greater than 1 (else every frequency is 1)", self.base)


def rotary_exponents(head_dim: int, device=None) -> torch.Tensor:
    """(head_dim/2,) float64 exponents 2i/head_dim of the frequencies theta_i = base^(-2i/head_dim)."""
    return torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim


def kept_frequencies(d_head: int, base: float, train_length: int) -> int:
    """K, how many of the Dh/2 frequencies theta_i = base^(-2i/Dh) complete a period within
    ``train_length`` positions (theta_i >= 2 pi / L), the highest first; all of them for L = 0. FoPE's
    clip floor and HoPE's rule for p-RoPE's kept pairs."""
    theta = base ** -rotary_exponents(d_head)
    return int((theta >= 2 * math.pi / train_length).sum()) if train_length else d_head // 2


def rotary_angles(positions: torch.Tensor, head_dim: int, base: float) -> torch.Tensor:
    """(T, head_dim/2) angles positions[t] * base^(-2i/head_dim), in float32."""
    inv_freq = base ** -rotary_exponents(head_dim, positions.device)
    return (positions.to(torch.float64)[:, None] * inv_freq).to(torch.float32)


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x[..., 2i], x[..., 2i+1]) by the angle whose cos/sin are given (T, Dh/2):
    (x1 cos - x2 sin, x1 sin + x2 cos), computed as one complex product (x1 + i x2)(cos + i sin) in
    float32 and returned in x's dtype. One product forward and one backward instead of eight
    strided elementwise passes: the rotation took 12% of a RoPE training step of the demo's model,
    about half that now (the same values; a vectorised kernel may round a last bit differently).

    Under ``torch.compile`` the same rotation is computed in real arithmetic (``rotate_pairs_real``:
    inductor generates no code for complex tensors)."""
    if torch.compiler.is_compiling():
        return rotate_pairs_real(x, cos, sin)
    dtype, x = x.dtype, x.float()
    if x.stride(-1) != 1 or x.storage_offset() % 2 or any(stride % 2 for stride in x.stride()[:-1]):
        # a complex view needs aligned (real, imaginary) pairs: a fresh copy has them (contiguous() may
        # return the tensor itself, at its odd offset)
        x = x.clone(memory_format=torch.contiguous_format)
    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * torch.complex(cos, sin)).flatten(-2).to(dtype)


def rotate_pairs_real(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``rotate_pairs`` in real arithmetic: pair (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos), in
    float32, returned in x's dtype (the form a compiled model traces)."""
    pairs = x.float().unflatten(-1, (-1, 2))
    x1, x2 = pairs[..., 0], pairs[..., 1]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2).to(x.dtype)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """x: (..., seq, head_dim), positions: (seq,) ints -> x with pair (2i, 2i+1) rotated by
    positions * base^(-2i/head_dim)."""
    angles = rotary_angles(positions, x.size(-1), base)
    return rotate_pairs(x, angles.cos(), angles.sin())


LEARNED_FREQUENCIES = (
    "with `rope.learn_frequencies: true` it stands for four schemes of 2024–25 on one position axis. LieRE "
    "(Ostmeier et al. 2025) turns a head's queries and keys by R(m) = exp(m A) with a learned dense skew-symmetric "
    "A; every real skew-symmetric A is P B Pᵀ with P orthogonal and B block-diagonal in 2×2 rotation blocks of "
    "speeds ω_i, so (R(m) q)·(R(n) k) = (Pᵀq)ᵀ exp((n − m) B) (Pᵀk): RoPE with the speeds ω_i on the projected "
    "Pᵀq and Pᵀk, and Pᵀ folds into the head's learned query and key projections. ComRoPE's commuting trainable "
    "generators (CVPR 2025) and the commuting multiplicative GRAPE-M (arXiv 2512.07805) are, on one axis, one such "
    "generator; RoPE-Mixed (Heo et al. 2024) learns the speeds directly. The suite learns log ω per head and pair, "
    "shared by a stack's layers (LieRE learns a generator per layer); tests/models/positional/test_schemes_2026.py "
    "checks the identity on a dense generator")


class RotaryPositional(PositionalEncoding):
    """q_m <- R(m) q_m, k_n <- R(n) k_n, so q_m . k_n depends on m - n only and norms are kept.

    Frequencies are spread over the head dimension (d_head), not d_model, so every head gets the
    full range of wavelengths. With ``rope.learn_frequencies`` each head's Dh/2 frequencies are
    parameters (their logarithms, so they stay positive), initialised to theta_i and shared by the
    stack's layers: R_h(m) = exp(m A_h), A_h block-diagonal with blocks of angular speed omega_{h,i}.
    A learned generator of any other basis (LieRE's dense skew-symmetric A = P B P^T in one
    dimension) scores the same, its P folding into the head's query and key projections.
    """

    card = SchemeCard(
        title="RoPE",
        relative=True,
        summary="rotary queries/keys, pairs (2i, 2i+1), `rope.base`",
        paper="su",
        export_form="rotary",
        profile_label="rotated q · k for constant q, k (1 at d = 0)",
        scales_frequencies=True,
        reductions=LEARNED_FREQUENCIES,
    )

    Options = RotaryOptions

    @classmethod
    def check_config(cls, cfg) -> None:
        d_head = cfg.d_model // cfg.n_heads
        require(d_head % 2 == 0, "d_model", f"a multiple of 2 * model.n_heads for rotary positions (an even head "
                f"size; {cfg.d_model} / {cfg.n_heads} heads = {d_head})", cfg.d_model)
        learned = cls.Options is RotaryOptions and cfg.positional.rope.learn_frequencies  # rope's own option
        require(not learned or cfg.length_scaling.rotary == "none", "length_scaling.rotary",
                "none with model.positional.rope.learn_frequencies (PI, NTK and YaRN rescale the base's frequencies; "
                "learned ones have no base)", cfg.length_scaling.rotary)

    def __init__(self, kind, cfg, base: float | None = None):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.base = cfg.positional.rope.base if base is None else base
        self.frequency_scaling = frequency_scaling(cfg, kind)
        self.log_frequencies = None
        if base is None and cfg.positional.rope.learn_frequencies:
            exponents = rotary_exponents(self.d_head)  # log theta_i = -(2i/Dh) log base, each head alike
            self.log_frequencies = nn.Parameter((-exponents * math.log(self.base)).float().repeat(self.n_heads, 1))

    def _angles(self, pos: torch.Tensor, length_factor: torch.Tensor | None) -> torch.Tensor:
        """(T, Dh/2) float32 angles, or (B, T, Dh/2) with each sentence's frequencies rescaled
        (``frequency_scaling``), computed on the positions' device (no table to outgrow, no host
        read of the positions); (H, T, Dh/2) with learned frequencies, each head its own."""
        if self.log_frequencies is not None:
            return pos.to(torch.float32)[:, None] * self.log_frequencies.exp()[:, None, :]
        if self.frequency_scaling is None or length_factor is None:
            return rotary_angles(pos, self.d_head, self.base)
        return self.frequency_scaling.angles(pos, self.base, rotary_exponents(self.d_head, pos.device), length_factor)

    def _cos_sin(self, pos: torch.Tensor, length_factor: torch.Tensor | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of ``_angles``: (T, Dh/2) or (H, T, Dh/2), or (B, 1, T, Dh/2) times YaRN's
        magnitude per sentence."""
        angles = self._angles(pos, length_factor)
        if self.frequency_scaling is None or length_factor is None:
            return angles.cos(), angles.sin()
        magnitude = self.frequency_scaling.magnitude(length_factor)[:, None, None, None]
        return angles.cos()[:, None] * magnitude, angles.sin()[:, None] * magnitude

    def rotate(self, q, k, q_pos, k_pos):
        return (rotate_pairs(q, *self._cos_sin(q_pos, self.length_factor)),
                rotate_pairs(k, *self._cos_sin(k_pos, self.length_factor)))
