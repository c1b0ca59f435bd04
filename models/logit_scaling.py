"""What every attention logit is multiplied by, from ln n — n the keys a query sees — chosen once, when
the attention is built (``logit_scaling``): nothing (the usual softmax), log-n scaling's
max(1, ln n / ln n_train) (``model.length_scaling.logn``: a test-time setting, no weight), or SSMax's
s_h ln n (``model.softmax: ssmax``, Nakanishi 2025: s learned per head of the layer).

Each takes ``log_n`` broadcastable to the logits (B or 1, 1, Tq or 1, 1) and gives the factor
broadcastable to them (B or 1, H or 1, Tq or 1, 1), or None where nothing scales."""
from __future__ import annotations

import math

import torch
from torch import nn

SSMAX_INIT = 0.43  # s at the start (the paper's Figure 1): s ln n = 1 at n = e^(1/0.43), about 10 keys


class LogitScaling(nn.Module):
    """The usual softmax: no factor (``scales`` False: the attention does not count its keys)."""

    scales = False

    def forward(self, log_n: torch.Tensor) -> torch.Tensor | None:
        return None


class LogNScaling(LogitScaling):
    """max(1, ln n / ln n_train): logits of sequences longer than training sharpened as they grow."""

    scales = True

    def __init__(self, n_train: int):
        super().__init__()
        self.base = math.log(n_train)

    def forward(self, log_n: torch.Tensor) -> torch.Tensor:
        return (log_n / self.base).clamp(min=1.0)


class SSMaxScaling(LogitScaling):
    """s_h ln n, ``s`` (H,) learned."""

    scales = True

    def __init__(self, n_heads: int):
        super().__init__()
        self.s = nn.Parameter(torch.full((n_heads,), SSMAX_INIT))

    def forward(self, log_n: torch.Tensor) -> torch.Tensor:
        return self.s.float()[None, :, None, None] * log_n


def logit_scaling(softmax: str, logn_train: int | None, n_heads: int) -> LogitScaling:
    """The scaling of ``softmax`` (``ssmax`` or ``softmax``), with log-n scaling from ``logn_train`` keys
    (None: off; the config refuses both at once)."""
    if softmax == "ssmax":
        return SSMaxScaling(n_heads)
    return LogNScaling(logn_train) if logn_train else LogitScaling()
