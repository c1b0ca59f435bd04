"""Dropout with a cheaper mask on CPU.

``F.dropout`` on CPU draws its mask with ``bernoulli_``: measured at 16% of a Multi30k training
update (bench/profile_step.py). Here every 64-bit draw of the default generator gives the mask of
four elements (16 random bits each); an element is kept when its bits, read as a signed 16-bit
integer, are at least ``round(p * 2**16) - 2**15``, so the drop probability is ``p`` rounded to
a multiple of 2^-16 (at most 7.6e-6 away). Kept elements are scaled by 1 / (1 - p), as in
``F.dropout``. On other devices this is ``F.dropout`` (its fused kernels are fast there), and so it is under ``torch.compile`` (the
compiler generates its own mask; the in-place draw below would break its graph).

The mask comes from the default generator, so a seed fixes it and a restored RNG state continues
it (exact resume). It differs from ``F.dropout``'s for the same seed: a run made before this
module existed is not reproduced bit for bit, only in distribution.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_HALF = 2 ** 15


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """x (any shape) with each element zeroed with probability ``p`` and the rest scaled by 1/(1-p)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or torch.compiler.is_compiling():
        return F.dropout(x, p, training)
    threshold = round(p * 2 * _HALF) - _HALF
    if threshold >= _HALF:  # p within 2^-17 of 1: nothing is kept
        return x * 0.0
    n = x.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-2 ** 63, None)
    keep = words.view(torch.int16)[:n].view(x.shape) >= threshold
    # a float mask holding the scale: one multiplication forward and one backward (measured
    # faster than torch.where or masked_fill with a boolean mask)
    return x * keep.to(x.dtype).mul_(1.0 / (1.0 - p))


class Dropout(nn.Module):
    """``nn.Dropout`` with the CPU mask of ``dropout`` (no parameters, so checkpoints are unchanged)."""

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
