"""The ignite engines: the trainer (forward, label-smoothed loss, backward, clipped accumulated
update) and the evaluator (teacher-forced loss, NLL, perplexity, accuracy).

One update is one batch of all the tokens it saw: with ``train.accumulate`` batches per update
and with data parallelism over several processes, the gradient is that of the loss summed over
every real target token of the update's batches on every rank, divided by their number (as
fairseq normalises), not a mean of per-batch means, which would weigh a short batch's tokens
more than a long one's.
"""
from __future__ import annotations

import math

import ignite.distributed as idist
import torch
import torch.nn.functional as F
from ignite.engine import Engine
from ignite.metrics import Metric
from ignite.metrics.metric import reinit__is_reduced, sync_all_reduce

from experiment.train_config import TrainConfig
from training.graphs import CapturedUpdate
from training.loss import fused_token_loss, token_loss
from utils.errors import UserError

# What a manifest records as the run's arithmetic (``autocast_dtype``'s answer): ``amp: auto`` trains
# a CUDA run in bf16 and a CPU run in fp32, so the config alone does not say.
PRECISION_NAMES = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def autocast_dtype(train_cfg: TrainConfig, device: torch.device) -> torch.dtype | None:
    """Mixed-precision dtype: bf16 (or fp16) on CUDA, None (fp32) on CPU."""
    amp = train_cfg.amp
    if device.type != "cuda" or amp == "none":
        return None
    if amp == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if amp == "bf16" else torch.float16


@torch.no_grad()
def token_stats(logits: torch.Tensor, target: torch.Tensor, pad_id: int) -> tuple[float, int]:
    """(NLL summed over real tokens, number of correctly predicted real tokens), for evaluation."""
    flat_logits, flat_target = logits.flatten(0, 1).float(), target.flatten()
    nll = F.cross_entropy(flat_logits, flat_target, ignore_index=pad_id, reduction="sum")
    correct = (flat_logits.argmax(-1).eq(flat_target) & flat_target.ne(pad_id)).sum()
    return nll.item(), int(correct)


class TokenMetrics(Metric):
    """Validation loss (label-smoothed), NLL, perplexity and token accuracy, summed over tokens."""

    required_output_keys = ("loss_sum", "nll_sum", "correct", "ntokens")

    @reinit__is_reduced
    def reset(self) -> None:
        self._loss = self._nll = self._correct = self._tokens = 0.0

    @reinit__is_reduced
    def update(self, output: tuple[float, float, float, int]) -> None:
        loss_sum, nll_sum, correct, ntokens = output
        self._loss += loss_sum
        self._nll += nll_sum
        self._correct += correct
        self._tokens += ntokens

    @sync_all_reduce("_loss", "_nll", "_correct", "_tokens")
    def compute(self) -> dict:
        n = max(self._tokens, 1.0)
        return {"loss": self._loss / n, "nll": self._nll / n, "ppl": math.exp(min(self._nll / n, 50.0)),
                "accuracy": self._correct / n}


class NonFiniteLoss(UserError):
    """The loss became NaN or infinite."""


class NonFiniteGuard:
    """Watches the training loss for NaN/inf without reading it on the host every update.

    ``note`` records the first non-finite update and its loss on the device (a few element-wise
    ops, queued like the rest of the step); ``check`` reads them — one synchronisation — and
    raises ``NonFiniteLoss`` naming that update. The trainer's handlers call ``check`` at each log
    point and before every checkpoint, so a checkpoint never holds weights updated from a
    non-finite loss, and training stops at most ``train.log_every`` updates after it.
    """

    def __init__(self) -> None:
        self.first_bad: torch.Tensor | None = None  # () long, -1 while every loss was finite
        self.value: torch.Tensor | None = None  # () float, the first non-finite loss

    def start(self, device: torch.device) -> None:
        """Allocate the device state (before a CUDA graph captures ``note``: a captured update
        must find its tensors outside the graph's memory)."""
        if self.first_bad is None:
            self.first_bad = torch.full((), -1, dtype=torch.long, device=device)
            self.value = torch.zeros((), device=device)

    def note(self, loss: torch.Tensor, update: int | torch.Tensor) -> None:
        """Record ``loss`` of ``update`` (an int, or a () long tensor on the device: a captured
        update reads its number there). In place, so a captured graph updates the same tensors."""
        self.start(loss.device)
        first = ~torch.isfinite(loss.detach()) & self.first_bad.lt(0)
        self.first_bad.copy_(torch.where(first, update, self.first_bad))
        self.value.copy_(torch.where(first, loss.detach().float(), self.value))

    def check(self) -> None:
        if self.first_bad is not None and int(self.first_bad) >= 0:
            raise NonFiniteLoss(f"the loss became {float(self.value)} at update {int(self.first_bad)}; "
                                f"training stopped")


def unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside DistributedDataParallel / torch.compile wrappers."""
    while hasattr(model, "module") or hasattr(model, "_orig_mod"):
        model = getattr(model, "module", None) or model._orig_mod
    return model


def train_loss(model, batch, pad_id: int, smoothing: float,
               amp_dtype: torch.dtype | None, fixed_shapes: bool = False) -> tuple[torch.Tensor, int]:
    """(label-smoothed loss summed over the batch's real target tokens, their count).

    In full precision the output projection is fused with the loss (``fused_token_loss``: only
    real tokens projected); under autocast the model's logits go through ``token_loss``. The
    count is the collator's (``Batch.ntokens``, counted on the host), so nothing here waits for
    the device. ``fixed_shapes`` (an update captured as a CUDA graph): every tensor keeps the
    batch's shape — the logits of every position through ``token_loss``, padding ignored, since
    the fused loss selects the real tokens, a shape that changes per batch — and autocast keeps
    no cache of cast weights (a capture must not hold them).
    """
    if fixed_shapes:
        with torch.autocast(batch.src.device.type, dtype=amp_dtype or torch.bfloat16, enabled=amp_dtype is not None,
                            cache_enabled=False):
            logits = model(batch.src, batch.tgt_in)
        return token_loss(logits, batch.tgt_out, pad_id, smoothing, batch.ntokens)
    if amp_dtype is None:
        states = model(batch.src, batch.tgt_in, features_only=True)
        return fused_token_loss(states, unwrapped(model).output.weight, batch.tgt_out, pad_id, smoothing,
                                batch.ntokens)
    with torch.autocast(batch.src.device.type, dtype=amp_dtype):
        logits = model(batch.src, batch.tgt_in)
    return token_loss(logits, batch.tgt_out, pad_id, smoothing, batch.ntokens)


def build_optimizer(params, train_cfg: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """Adam or AdamW as ``train`` says: ``fused_optimizer`` takes the fused kernel (one launch per
    step); ``cuda_graphs`` on CUDA makes it capturable, with the learning rate a tensor on the
    device that the scheduler fills in place (a captured step reads it there, not as a constant)."""
    cls = torch.optim.AdamW if train_cfg.optimizer == "adamw" else torch.optim.Adam
    graphs = uses_cuda_graphs(train_cfg, device)
    options = {"betas": tuple(train_cfg.betas), "eps": train_cfg.eps, "weight_decay": train_cfg.weight_decay}
    if train_cfg.fused_optimizer:
        options["fused"] = True
    if graphs:
        options["capturable"] = True
    lr = torch.tensor(train_cfg.lr, dtype=torch.float32, device=device) if graphs else train_cfg.lr
    return cls(params, lr=lr, **options)


def uses_cuda_graphs(train_cfg: TrainConfig, device: torch.device) -> bool:
    """Whether updates are captured as CUDA graphs: ``train.cuda_graphs`` on a CUDA device (on a
    CPU the option does nothing; the manifest records what a run used)."""
    return train_cfg.cuda_graphs and device.type == "cuda"


def rescale_to_token_mean(params: list[torch.nn.Parameter], tokens: int, world: int, scale: float,
                          device: torch.device) -> None:
    """Gradients (already averaged over the ranks by DDP) x world x ``scale`` (max_tokens) / the
    ``tokens`` of the update summed over the ranks. The count is summed on the device: nothing
    waits for it."""
    total = torch.tensor(float(tokens), device=device)
    if world > 1:
        total = idist.all_reduce(total)
    factor = world * scale / total.clamp(min=1.0)
    for p in params:
        if p.grad is not None:
            p.grad.mul_(factor.to(p.grad.dtype))


def create_trainer(model, optimizer, scheduler, scaler, train_cfg: TrainConfig, pad_id: int,
                   device: torch.device, guard: NonFiniteGuard) -> Engine:
    """The ignite trainer: forward, label-smoothed loss, backward, clipped (accumulated) update.

    Its output per batch: {"loss": () tensor on the device, "ntokens": int, "lr": float} and, at
    an update, "grad_norm" (() tensor on the device). Nothing in the step reads a device value
    on the host (the loss and norm are read at log points; ``guard`` watches for non-finite
    losses), so on a GPU the host queues the next batch while this one runs. (With fp16 the
    GradScaler's step reads its inf check: that is the scaler's design; bf16 needs no scaler.)
    With ``train.cuda_graphs`` on CUDA: ``_graphed_trainer``."""
    if uses_cuda_graphs(train_cfg, device):
        return _graphed_trainer(model, optimizer, scheduler, train_cfg, pad_id, device, guard)
    accumulate, clip = train_cfg.accumulate, train_cfg.clip_norm
    amp_dtype = autocast_dtype(train_cfg, device)
    params = [p for p in model.parameters() if p.requires_grad]
    world = idist.get_world_size()
    # With one batch per update on one process the per-token mean is the update's loss; otherwise
    # each batch contributes its summed loss over a constant of the batch's scale (max_tokens,
    # the same on every rank, so that the gradient keeps a per-token magnitude for fp16's
    # scaler), and the update rescales the gradient by that constant over the update's tokens.
    token_weighted = accumulate > 1 or world > 1
    scale = float(train_cfg.max_tokens)
    pending = [0]  # real target tokens this process has seen since the last update

    def step(engine: Engine, batch) -> dict:
        model.train()
        batch = batch.to(device, non_blocking=True)
        try:
            loss_sum, ntok = train_loss(model, batch, pad_id, train_cfg.label_smoothing, amp_dtype)
            loss = loss_sum / max(ntok, 1)
            guard.note(loss, (engine.state.iteration - 1) // accumulate + 1)
            scaler.scale(loss_sum / scale if token_weighted else loss).backward()
        except torch.OutOfMemoryError:
            raise UserError(f"out of memory on {device} with a batch of {batch.src.numel() + batch.tgt_in.numel()} "
                            f"padded tokens: lower train.max_tokens (now {train_cfg.max_tokens})") from None
        pending[0] += ntok
        out = {"loss": loss.detach(), "ntokens": ntok}
        if engine.state.iteration % accumulate == 0:
            scaler.unscale_(optimizer)
            if token_weighted:
                rescale_to_token_mean(params, pending[0], world, scale, device)
            pending[0] = 0
            norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            out["grad_norm"] = norm.detach()
        return {**out, "lr": host_lr(optimizer, scheduler, train_cfg.lr)}

    return Engine(step)


def host_lr(optimizer: torch.optim.Optimizer, scheduler, base_lr: float) -> float:
    """The learning rate of the next update, on the host: a capturable optimizer's is a device
    tensor, which is not read back (the schedule's multiplier times ``train.lr`` is the same value)."""
    lr = optimizer.param_groups[0]["lr"]
    return base_lr * scheduler.lr_lambdas[0](scheduler.last_epoch) if isinstance(lr, torch.Tensor) else lr


def _graphed_trainer(model, optimizer, scheduler, train_cfg: TrainConfig, pad_id: int, device: torch.device,
                     guard: NonFiniteGuard) -> Engine:
    """``create_trainer``'s engine when updates are CUDA graphs: ``training.graphs.CapturedUpdate``
    runs the same arithmetic (the loss over every position of the fixed shape), replayed from a
    graph per batch shape; the same outputs. ``engine.captured`` is the ``CapturedUpdate`` (the
    manifest reads what it captured)."""
    if idist.get_world_size() > 1:
        raise UserError("train.cuda_graphs needs one process (data parallelism synchronises inside the "
                        "update); set train.cuda_graphs=false under torchrun")
    amp_dtype = autocast_dtype(train_cfg, device)
    params = [p for p in model.parameters() if p.requires_grad]
    captured = CapturedUpdate(
        lambda b: train_loss(model, b, pad_id, train_cfg.label_smoothing, amp_dtype, fixed_shapes=True)[0],
        optimizer, params, train_cfg.clip_norm, device, guard)

    def graphed_step(engine: Engine, batch) -> dict:
        model.train()
        batch = batch.to(device, non_blocking=True)
        try:
            loss, norm = captured(batch, engine.state.iteration)
        except torch.OutOfMemoryError:
            raise UserError(f"out of memory on {device} with a batch of {batch.src.numel() + batch.tgt_in.numel()} "
                            f"padded tokens: lower train.max_tokens (now {train_cfg.max_tokens})") from None
        scheduler.step()
        return {"loss": loss, "ntokens": batch.ntokens, "grad_norm": norm,
                "lr": host_lr(optimizer, scheduler, train_cfg.lr)}

    engine = Engine(graphed_step)
    engine.captured = captured
    return engine


def create_evaluator(model, train_cfg: TrainConfig, pad_id: int, device: torch.device) -> Engine:
    """The ignite evaluator: teacher-forced loss, NLL, perplexity and accuracy (``TokenMetrics``,
    attached as ``state.metrics["valid"]``)."""
    amp_dtype = autocast_dtype(train_cfg, device)

    @torch.no_grad()
    def step(engine: Engine, batch) -> dict:
        model.eval()
        batch = batch.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            logits = model(batch.src, batch.tgt_in)
        loss_sum, ntok = token_loss(logits, batch.tgt_out, pad_id, train_cfg.label_smoothing)
        nll_sum, correct = token_stats(logits, batch.tgt_out, pad_id)
        return {"loss_sum": loss_sum.item(), "nll_sum": nll_sum, "correct": correct, "ntokens": ntok}

    evaluator = Engine(step)
    TokenMetrics().attach(evaluator, "valid")
    return evaluator
