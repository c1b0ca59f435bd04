"""Multi-head attention for self- and cross-attention, with positional hooks and a K/V cache.

Shapes: inputs (B, T, D); inside, (B, H, T, Dh) with Dh = D / H; logits (B, H, Tq, Tk).

Masks: ``key_padding_mask`` (B, Tk) is True at padding keys; ``causal`` hides keys after the
query (by position). How the probabilities meet the values is the kernel's
(``models.attention_kernels``: fused SDPA, FlexAttention, or the explicit form that returns the
weights, asked for only when wanted); what multiplies the logits is the logit scaling's
(``models.logit_scaling``).

Cache: for self-attention the keys/values of earlier steps come in through ``past`` and the
grown tensors go out; for cross-attention the memory's keys/values are computed once and reused.
Keys are cached after ``rotate``, i.e. with their positions already applied (and in the width the
scheme gives them); a scheme's ``token_state`` (fox's gates) is cached as a third tensor.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from models.attention_kernels import Attending, attention_kernel
from models.logit_scaling import logit_scaling
from models.positional.base import PositionalEncoding

KV = tuple[torch.Tensor, ...]  # keys, values (B, H, T, Dk), (B, H, T, Dh); the scheme's token states (B, H, T, F)


class MultiHeadAttention(nn.Module):
    """Attention with a fused QKV projection (self) or Q + fused KV projections (cross)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, cross: bool = False, kernel: str = "sdpa",
                 logn_train: int | None = None, softmax: str = "softmax"):
        super().__init__()
        self.kernel = attention_kernel(kernel)  # models.attention_kernels: fused, FlexAttention (explicit within)
        # what every logit is multiplied by (models.logit_scaling): nothing, log-n scaling, or SSMax
        self.scaling = logit_scaling(softmax, logn_train, n_heads)
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.cross = cross
        if cross:
            self.q_proj = nn.Linear(d_model, d_model)
            self.kv_proj = nn.Linear(d_model, 2 * d_model)
        else:
            self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, n*D) -> n tensors (B, H, T, Dh)."""
        b, t, _ = x.shape
        return x.view(b, t, -1, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)

    def forward(self, x: torch.Tensor, pe: PositionalEncoding, q_pos: torch.Tensor,
                k_pos: torch.Tensor, memory: torch.Tensor | None = None,
                key_padding_mask: torch.Tensor | None = None, causal: bool = False,
                past: KV | None = None, need_weights: bool = False,
                group: int = 1) -> tuple[torch.Tensor, KV, torch.Tensor | None]:
        """x: (B, Tq, D); memory: (B, Tk, D) for cross-attention; q_pos: (Tq,), k_pos: (Tk,).

        ``past``: self-attention keys/values of earlier steps (B, H, T_past, Dh) (and their token
        states), or for cross-attention the memory's keys/values (then ``memory`` is not projected
        again).
        ``group`` (cross-attention): the rows of ``x`` come in groups of that many consecutive
        rows that share one memory row (beam search's hypotheses of a sentence), so ``memory``,
        its keys/values and ``key_padding_mask`` have B / group rows; each group's queries attend
        to their memory together, as G·Tq queries of one row.
        Returns (output (B, Tq, D), keys/values to cache, weights (B, H, Tq, Tk) or None).
        """
        if self.cross and group > 1:
            return self._grouped(x, pe, q_pos, k_pos, memory, key_padding_mask, past, need_weights, group)
        q, k, v, state = self._project(x, pe, q_pos, k_pos, memory, past)
        attending = Attending(q, k, v, state, pe, q_pos, k_pos, key_padding_mask, causal, cached=past is not None,
                              scale=1.0 / math.sqrt(self.d_head * pe.score_scale),
                              factor=self.scaling(q_pos, key_padding_mask, causal, len(k_pos)),
                              p=self.dropout if self.training else 0.0)
        out, weights = self.kernel(attending, need_weights)
        return self._merge_heads(out), ((k, v) if state is None else (k, v, state)), weights

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # SSMax's s was the attention's own parameter `ssmax` before the scaling was a module of its own
        if prefix + "ssmax" in state_dict:
            state_dict[prefix + "scaling.s"] = state_dict.pop(prefix + "ssmax")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _merge_heads(self, out: torch.Tensor) -> torch.Tensor:
        """(B, H, Tq, Dh) -> the output projection of (B, Tq, H·Dh)."""
        b, h, t, dh = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, h * dh))

    def _project(self, x, pe, q_pos, k_pos, memory, past):
        """Queries, keys and values (B, H, T, Dk or Dh) with the scheme's ``rotate`` applied, past
        keys/values prepended, and the keys' token states (or None)."""
        state = None
        if self.cross:
            q = self._heads(self.q_proj(x))[0]
            if past is None:
                k, v = self._heads(self.kv_proj(memory))
                q, k = pe.rotate(q, k, q_pos, k_pos)
            else:  # cached memory keys are already rotated: rotate the queries only
                k, v = past
                q, _ = pe.rotate(q, k[..., :0, :], q_pos, k_pos[:0])
        else:
            q, k, v = self._heads(self.qkv_proj(x))
            q, k = pe.rotate(q, k, q_pos, q_pos)
            state = pe.token_state(x)
            if past is not None:
                k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
                state = None if state is None else torch.cat([past[2], state], dim=2)
        return q, k, v, state

    def _grouped(self, x, pe, q_pos, k_pos, memory, key_padding_mask, past, need_weights, group):
        """Cross-attention of ``group`` consecutive rows of x per memory row: their queries are
        stacked into one row of G·Tq queries, attended as usual, and unstacked."""
        b, t, d = x.shape
        stacked = x.view(b // group, group * t, d)
        out, kv, weights = self.forward(stacked, pe, q_pos.repeat(group), k_pos, memory, key_padding_mask,
                                        past=past, need_weights=need_weights)
        if weights is not None:
            weights = weights.view(b // group, self.n_heads, group, t, -1).transpose(1, 2).reshape(
                b, self.n_heads, t, -1)
        return out.view(b, t, d), kv, weights

