"""The training loss: label-smoothed cross-entropy summed over the real (non-padding) target tokens.

Per token with logits z (V classes), target y and smoothing e (Szegedy et al. 2016; the same
definition as ``F.cross_entropy(..., label_smoothing=e)``: the uniform part covers all V classes):

    loss = logsumexp(z) - (1 - e) * z_y - (e / V) * sum_j z_j,   d loss / d z = softmax(z) - q,

where q = (1 - e) * onehot(y) + e / V.

``token_loss`` computes it from logits (B, T, V) with ``F.cross_entropy``: the evaluator uses it,
and so does the trainer under mixed precision. ``fused_token_loss`` computes the same value from
the final decoder states (B, T, D) and the output projection's weight (V, D), fused with that
projection: only the real tokens' states are projected, in blocks of rows small enough to stay in
cache, and backward turns each block of logits into its gradient in place. On CPU the unfused
version materialises about six (N, V) tensors per update (log-probabilities, the NLL and
smoothing gradients, their sum, the log-softmax gradient): measured at a fifth of a Multi30k
update (bench/profile_step.py).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

# Rows per block: 524 rows (16 MiB of float32 logits) with a vocabulary of 8,000; measured on
# 2 cores against blocks of 2^19..2^25 elements, this was the fastest (0.44 s vs 0.49-0.71 s for
# the loss of 3,400 tokens, forward and backward).
BLOCK_ELEMENTS = 2 ** 22


def token_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float,
               ntokens: int | None = None) -> tuple[torch.Tensor, int]:
    """logits (B, T, V), target (B, T) -> (label-smoothed loss summed over real tokens, their count).

    ``ntokens``: the count if the caller knows it (``Batch.ntokens``); otherwise it is counted on
    the device and read back (a host synchronisation).
    """
    loss = F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), ignore_index=pad_id,
                           label_smoothing=smoothing, reduction="sum")
    return loss, int(target.ne(pad_id).sum()) if ntokens is None else ntokens


def fused_token_loss(states: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, pad_id: int,
                     smoothing: float, ntokens: int | None = None) -> tuple[torch.Tensor, int]:
    """states (B, T, D) final decoder states, weight (V, D) output projection (no bias), target
    (B, T) -> (label-smoothed loss summed over real tokens, their count); equal to
    ``token_loss(states @ weight.T, target, ...)``. With ``ntokens`` (the count of real tokens,
    known on the host) the rows are selected with a static size, without waiting for the device.
    """
    mask = target.flatten().ne(pad_id)
    real = (mask.nonzero() if ntokens is None else torch.nonzero_static(mask, size=ntokens)).squeeze(1)
    rows = states.flatten(0, 1).index_select(0, real)
    loss = LinearLabelSmoothedCrossEntropy.apply(rows, weight, target.flatten().index_select(0, real), smoothing)
    return loss, int(real.numel())


class LinearLabelSmoothedCrossEntropy(torch.autograd.Function):
    """sum over rows of the label-smoothed cross-entropy of ``rows @ weight.T``.

    rows (N, D), weight (V, D), target (N,) -> scalar. The logits, kept block by block from
    forward, become their own gradient in backward, so backward can run only once (no
    ``retain_graph``); no double backward.
    """

    @staticmethod
    def forward(ctx, rows: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                smoothing: float) -> torch.Tensor:
        vocab = weight.size(0)
        block = max(1, BLOCK_ELEMENTS // vocab)
        blocks, lses = [], []
        dtype = torch.promote_types(rows.dtype, torch.float32)  # softmax statistics in >= float32
        total = rows.new_zeros((), dtype=dtype)
        for start in range(0, rows.size(0), block):
            logits = (rows[start:start + block] @ weight.t()).to(dtype)  # (n, V)
            lse = torch.logsumexp(logits, dim=1)
            chosen = logits.gather(1, target[start:start + block, None]).squeeze(1)
            total += (lse - (1.0 - smoothing) * chosen - (smoothing / vocab) * logits.sum(1)).sum()
            blocks.append(logits)
            lses.append(lse)
        ctx.save_for_backward(rows, weight, target)
        ctx.blocks, ctx.lses, ctx.smoothing, ctx.block = blocks, lses, smoothing, block
        return total

    @staticmethod
    def backward(ctx, grad_total: torch.Tensor):
        rows, weight, target = ctx.saved_tensors
        if ctx.blocks is None:
            raise RuntimeError("LinearLabelSmoothedCrossEntropy: backward can run only once per forward")
        blocks, lses, smoothing, block = ctx.blocks, ctx.lses, ctx.smoothing, ctx.block
        ctx.blocks = ctx.lses = None
        vocab = weight.size(0)
        need_rows, need_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dtype = blocks[0].dtype if blocks else rows.dtype
        weight_c = weight.to(dtype)
        grad_rows = rows.new_empty(rows.shape, dtype=dtype) if need_rows else None
        grad_weight = weight.new_zeros(weight.shape, dtype=dtype) if need_weight else None
        for i, (grad, lse) in enumerate(zip(blocks, lses)):
            start = i * block
            grad.sub_(lse[:, None]).exp_().sub_(smoothing / vocab)  # softmax - e / V
            grad.scatter_add_(1, target[start:start + block, None],
                              grad.new_full((grad.size(0), 1), smoothing - 1.0))  # - (1 - e) at y
            if need_rows:
                torch.mm(grad, weight_c, out=grad_rows[start:start + block])
            if need_weight:
                grad_weight.addmm_(grad.t(), rows[start:start + block].to(dtype))
        scale = grad_total.to(dtype)
        return ((grad_rows * scale).to(rows.dtype) if need_rows else None,
                (grad_weight * scale).to(weight.dtype) if need_weight else None, None, None)
