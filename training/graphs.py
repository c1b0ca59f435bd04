"""The whole update as a CUDA graph: captured once per batch shape, replayed for every batch of it.

On a GPU a Transformer-base update is some thousand kernel launches whose queueing by the host
takes longer than their arithmetic (measured on an H200: the same step time for 2,600 and 10,000
target tokens). A CUDA graph replays them with one launch. ``CapturedUpdate`` does, per batch:

- the first batch of a shape: the update runs as usual (eagerly, on a side stream: it is also the
  capture's warm-up, which lets libraries create their handles and workspaces);
- the second: forward, loss (every position, padding ignored: ``train_loss(fixed_shapes=True)``),
  backward, clipping, the optimizer's step and the non-finite guard are captured into a graph over
  static input buffers, then replayed;
- from then on: the batch is copied into the buffers and the graph replayed.

What the capture needs, and where it comes from: fixed shapes (``train.static_shapes``: a dozen
shapes, not one per batch); a capturable optimizer whose learning rate is a device tensor
(``training.engine.build_optimizer``; the scheduler fills it in place); a guard and an update
counter updated in place on the device; one process, one batch per update, no fp16 loss scaler
(``TrainConfig`` refuses the rest). Dropout draws from the CUDA generator, which PyTorch advances
per replay, so every replay draws new masks. The graphs share one memory pool (they never run at
once, and their outputs are copied out after each replay).

Where a scheme's forward cannot be captured (an operation that waits for the host), the first
failed capture prints one line naming the error and the run goes on eagerly; the manifest's
``update`` records how many shapes were captured and the failure, if any.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from data.batching import Batch


class CapturedUpdate:
    """``update(batch, number) -> (loss per target token, gradient norm)``, () tensors on the
    device, from graphs captured per batch shape (see the module docstring)."""

    def __init__(self, loss_sum: Callable[[Batch], torch.Tensor], optimizer: torch.optim.Optimizer,
                 params: list[torch.nn.Parameter], clip_norm: float, device: torch.device, guard, pool=None):
        """``loss_sum(batch)``: the loss summed over the batch's real target tokens, computed with
        fixed shapes (the trainer's: ``train_loss(..., fixed_shapes=True)``); ``guard``: the
        trainer's ``NonFiniteGuard``; ``pool``: a graph memory pool to share with other updates
        that never run at the same time (``torch.cuda.graph_pool_handle()``; None: its own)."""
        self.loss_sum, self.optimizer, self.params, self.clip = loss_sum, optimizer, params, clip_norm
        self.device, self.guard = device, guard
        # On a CPU every update runs eagerly: the arithmetic a graph replays, testable anywhere.
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.seen: set[tuple] = set()
        self.graphs: dict[tuple, tuple] = {}  # shape -> (graph, static batch, ntokens, update, loss, norm)
        self.pool = pool
        self.failure: str | None = None  # why updates run eagerly, once a capture failed
        guard.start(device)

    @property
    def captured(self) -> int:
        """How many batch shapes have a graph."""
        return len(self.graphs)

    def _update(self, batch: Batch, ntokens: torch.Tensor, update: torch.Tensor | int) -> tuple[torch.Tensor, ...]:
        """The update's arithmetic, eager or being captured: forward, loss / ntokens, backward,
        clipped gradient norm, optimizer step."""
        loss = self.loss_sum(batch) / ntokens
        self.guard.note(loss, update)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.clip if self.clip > 0 else float("inf"))
        self.optimizer.step()
        return loss.detach(), norm.detach()

    def _eager(self, batch: Batch, number: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.optimizer.zero_grad(set_to_none=True)  # a graph's gradients must not be accumulated into
        ntokens = torch.tensor(float(max(batch.ntokens or 1, 1)), device=self.device)
        loss, norm = self._update(batch, ntokens, number)
        self.optimizer.zero_grad(set_to_none=True)
        return loss, norm

    def _capture(self, batch: Batch) -> tuple:
        static = Batch(batch.src.clone(), batch.tgt_in.clone(), batch.tgt_out.clone(), batch.indices, batch.ntokens)
        ntokens = torch.ones((), device=self.device)
        update = torch.zeros((), dtype=torch.long, device=self.device)
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, stream=self.stream):
            loss, norm = self._update(static, ntokens, update)
        self.pool = graph.pool()
        self.optimizer.zero_grad(set_to_none=True)
        return graph, static, ntokens, update, loss, norm

    def __call__(self, batch: Batch, number: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.stream is None:
            return self._eager(batch, number)
        key = (tuple(batch.src.shape), tuple(batch.tgt_in.shape))
        current = torch.cuda.current_stream(self.device)
        if self.failure is None and key in self.seen and key not in self.graphs:
            self.stream.wait_stream(current)
            try:
                self.graphs[key] = self._capture(batch)
            except RuntimeError as err:
                self.failure = str(err).splitlines()[0]
                print(f"CUDA graphs: the update of a {key[0][0]} x {key[0][1]} batch could not be captured "
                      f"({self.failure}); training goes on without graphs", file=sys.stderr)
            current.wait_stream(self.stream)
        captured = self.graphs.get(key)
        if captured is None:
            self.seen.add(key)
            self.stream.wait_stream(current)
            with torch.cuda.stream(self.stream):
                loss, norm = self._eager(batch, number)
            current.wait_stream(self.stream)
            return loss, norm
        graph, static, ntokens, update, loss, norm = captured
        static.src.copy_(batch.src, non_blocking=True)
        static.tgt_in.copy_(batch.tgt_in, non_blocking=True)
        static.tgt_out.copy_(batch.tgt_out, non_blocking=True)
        ntokens.fill_(float(max(batch.ntokens or 1, 1)))
        update.fill_(number)
        graph.replay()
        return loss.clone(), norm.clone()
