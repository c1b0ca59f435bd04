"""Rotary position embedding, RoPE (Su et al. 2021, "RoFormer", eq. 34)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from models.positional.base import PositionalEncoding
from utils.config import require


@dataclass
class RotaryOptions:
    """``model.positional.rope``."""

    base: float = 10000.0  # theta_i = base^(-2i/d_head)

    def __post_init__(self) -> None:
        require(self.base > 1, "base", "greater than 1 (else every frequency is 1)", self.base)


def rotary_angles(positions: torch.Tensor, head_dim: int, base: float) -> torch.Tensor:
    """(T, head_dim/2) angles positions[t] * base^(-2i/head_dim), in float32."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device=positions.device) / head_dim)
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


class RotaryPositional(PositionalEncoding):
    """q_m <- R(m) q_m, k_n <- R(n) k_n, so q_m . k_n depends on m - n only and norms are kept.

    Frequencies are spread over the head dimension (d_head), not d_model, so every head gets the
    full range of wavelengths.
    """

    summary = "rotary queries/keys, pairs (2i, 2i+1), `rope.base`"
    paper = "Su et al. 2021 (RoFormer)"

    ctranslate2_form = "rotary"

    Options = RotaryOptions
    profile_label = "rotated q · k for constant q, k (1 at d = 0)"

    @classmethod
    def check_config(cls, cfg) -> None:
        d_head = cfg.d_model // cfg.n_heads
        require(d_head % 2 == 0, "d_model", f"a multiple of 2 * model.n_heads for rotary positions (an even head "
                f"size; {cfg.d_model} / {cfg.n_heads} heads = {d_head})", cfg.d_model)

    def __init__(self, kind, cfg, base: float | None = None):
        super().__init__(kind, cfg.d_model, cfg.n_heads)
        self.base = cfg.positional.rope.base if base is None else base

    def _cos_sin(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(T, Dh/2) cos and sin of the angles, computed on the positions' device (no table to
        outgrow, no host read of the positions)."""
        angles = rotary_angles(pos, self.d_head, self.base)
        return angles.cos(), angles.sin()

    def rotate(self, q, k, q_pos, k_pos):
        return rotate_pairs(q, *self._cos_sin(q_pos)), rotate_pairs(k, *self._cos_sin(k_pos))
