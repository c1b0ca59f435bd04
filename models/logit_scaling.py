"""What every attention logit is multiplied by, from ln n — n the keys a query sees — chosen once, when
the attention is built (``logit_scaling``): nothing (the usual softmax), log-n scaling's
max(1, ln n / ln n_train) (``model.length_scaling.logn``: a test-time setting, no weight), or SSMax's
s_h ln n (``model.softmax: ssmax``, Nakanishi 2025: s learned per head of the layer).

Each is called with the queries' positions (Tq,), the keys' padding (B, Tk) or None, whether the mask
is causal and the number of keys, and gives the factor broadcastable to the logits (B or 1, H or 1,
Tq or 1, 1), or None where nothing scales."""
from __future__ import annotations

import math

import torch
from torch import nn

SSMAX_INIT = 0.43  # s at the start (the paper's Figure 1): s ln n = 1 at n = e^(1/0.43), about 10 keys


def log_n(q_pos: torch.Tensor, key_padding_mask: torch.Tensor | None, causal: bool, n_keys: int) -> torch.Tensor:
    """ln n broadcastable to the logits (B or 1, 1, Tq or 1, 1): n each query's position + 1 under a causal
    mask (the keys it sees), else each row's real keys."""
    if causal:
        n = (q_pos.float() + 1)[None, None, :, None]
    elif key_padding_mask is not None:
        n = (~key_padding_mask).sum(-1).float()[:, None, None, None]
    else:
        n = torch.full((1, 1, 1, 1), float(n_keys), device=q_pos.device)
    return torch.log(n.clamp(min=1))


class LogitScaling(nn.Module):
    """The usual softmax: no factor (the keys are not even counted)."""

    def forward(self, q_pos: torch.Tensor, key_padding_mask: torch.Tensor | None, causal: bool,
                n_keys: int) -> torch.Tensor | None:
        return None


class LogNScaling(LogitScaling):
    """max(1, ln n / ln n_train): logits of sequences longer than training sharpened as they grow."""

    def __init__(self, n_train: int):
        super().__init__()
        self.base = math.log(n_train)

    def forward(self, q_pos, key_padding_mask, causal, n_keys) -> torch.Tensor:
        return (log_n(q_pos, key_padding_mask, causal, n_keys) / self.base).clamp(min=1.0)


class SSMaxScaling(LogitScaling):
    """s_h ln n, ``s`` (H,) learned."""

    def __init__(self, n_heads: int):
        super().__init__()
        self.s = nn.Parameter(torch.full((n_heads,), SSMAX_INIT))

    def forward(self, q_pos, key_padding_mask, causal, n_keys) -> torch.Tensor:
        return self.s.float()[None, :, None, None] * log_n(q_pos, key_padding_mask, causal, n_keys)


def logit_scaling(softmax: str, logn_train: int | None, n_heads: int) -> LogitScaling:
    """The scaling of ``softmax`` (``ssmax`` or ``softmax``), with log-n scaling from ``logn_train`` keys
    (None: off; the config refuses both at once)."""
    if softmax == "ssmax":
        return SSMaxScaling(n_heads)
    return LogNScaling(logn_train) if logn_train else LogitScaling()
