"""Training with pytorch-ignite: trainer and evaluator engines, their handlers, and ``training``.

``training(local_rank, job)`` is what ``train.py`` runs under ``idist.Parallel``: one process per
device, each rank on its own shard of the batches, logging and checkpoints on rank 0 only.

Steps: ``train.max_steps`` counts optimizer updates (``train.accumulate`` batches each); ignite's
iteration counts batches. Exact resume: ``last.pt`` holds the model, optimizer, scheduler,
scaler, the engine state (iteration, epoch length), early-stopping state, every RNG state; the
batch sampler's position follows from the iteration, and each DataLoader draws from its own
generator so the global RNG sees the same calls in a resumed run as in an uninterrupted one.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import ignite.distributed as idist
import torch
import torch.nn.functional as F
from ignite.engine import Engine, Events
from ignite.handlers import EarlyStopping
from ignite.metrics import Metric
from ignite.metrics.metric import reinit__is_reduced, sync_all_reduce
from ignite.utils import manual_seed

from data.batching import EncodedSplit
from data.pipeline import make_loader, prepare_data
from utils.checkpoint import atomic_torch_save, keep_last, load_checkpoint, rng_state, set_rng_state
from utils.config import Config
from utils.decoding import translate_ids
from utils.errors import UserError
from utils.loading import build_model
from utils.metrics import corpus_bleu
from utils.run_dir import now, save_config, write_manifest
from utils.schedules import lr_lambda

log = logging.getLogger(__name__)


# -------------------------------------------------------------------------------- building blocks

def autocast_dtype(cfg: Config, device: torch.device) -> torch.dtype | None:
    """Mixed-precision dtype: bf16 (or fp16) on CUDA, None (fp32) on CPU."""
    amp = cfg.train.amp
    if device.type != "cuda" or amp == "none":
        return None
    if amp == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if amp == "bf16" else torch.float16


def token_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int,
               smoothing: float) -> tuple[torch.Tensor, int]:
    """logits (B, T, V), target (B, T) -> (label-smoothed loss summed over real tokens, their count)."""
    loss = F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), ignore_index=pad_id,
                           label_smoothing=smoothing, reduction="sum")
    return loss, int(target.ne(pad_id).sum())


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


def create_trainer(model, optimizer, scheduler, scaler, cfg: Config, pad_id: int,
                   device: torch.device) -> Engine:
    """The ignite trainer: forward, label-smoothed loss, backward, clipped (accumulated) update."""
    accumulate, clip = cfg.train.accumulate, cfg.train.clip_norm
    amp_dtype = autocast_dtype(cfg, device)
    params = [p for p in model.parameters() if p.requires_grad]

    def step(engine: Engine, batch) -> dict:
        model.train()
        batch = batch.to(device, non_blocking=True)
        try:
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                logits = model(batch.src, batch.tgt_in)
            loss_sum, ntok = token_loss(logits, batch.tgt_out, pad_id, cfg.train.label_smoothing)
            loss = loss_sum / max(ntok, 1)
            if not torch.isfinite(loss):
                raise NonFiniteLoss(f"the loss became {loss.item()} at update "
                                    f"{engine.state.iteration // accumulate + 1}; training stopped")
            scaler.scale(loss / accumulate).backward()
        except torch.OutOfMemoryError:
            raise UserError(f"out of memory on {device} with a batch of {batch.src.numel() + batch.tgt_in.numel()} "
                            f"padded tokens: lower train.max_tokens (now {cfg.train.max_tokens})") from None
        out = {"loss": loss.item(), "ntokens": ntok}
        if engine.state.iteration % accumulate == 0:
            scaler.unscale_(optimizer)
            norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            out["grad_norm"] = float(norm)
        out["lr"] = optimizer.param_groups[0]["lr"]
        return out

    return Engine(step)


def create_evaluator(model, cfg: Config, pad_id: int, device: torch.device) -> Engine:
    """The ignite evaluator: teacher-forced loss, NLL, perplexity and accuracy (``TokenMetrics``)."""
    amp_dtype = autocast_dtype(cfg, device)

    @torch.no_grad()
    def step(engine: Engine, batch) -> dict:
        model.eval()
        batch = batch.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            logits = model(batch.src, batch.tgt_in)
        loss_sum, ntok = token_loss(logits, batch.tgt_out, pad_id, cfg.train.label_smoothing)
        nll_sum, correct = token_stats(logits, batch.tgt_out, pad_id)
        return {"loss_sum": loss_sum.item(), "nll_sum": nll_sum, "correct": correct, "ntokens": ntok}

    evaluator = Engine(step)
    TokenMetrics().attach(evaluator, "valid")
    return evaluator


# -------------------------------------------------------------------------------- logging

class MetricsLog:
    """DIR/metrics.jsonl (one JSON object per point) and TensorBoard scalars under DIR/logs."""

    def __init__(self, run_dir: Path, resume_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.path = Path(run_dir) / "metrics.jsonl"
        if resume_step is not None and self.path.is_file():
            # drop points logged after the checkpoint we resume from (they will be logged again)
            kept = [line for line in self.path.read_text(encoding="utf-8").splitlines()
                    if line.strip() and json.loads(line)["step"] <= resume_step]
            self.path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        self.file = open(self.path, "a", encoding="utf-8")
        self.writer = SummaryWriter(str(Path(run_dir) / "logs"), purge_step=resume_step)

    def write(self, kind: str, step: int, **values) -> None:
        record = {"kind": kind, "step": step, "time": round(time.time(), 3), **values}
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        for key, value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"{kind}/{key}", value, step)

    def close(self) -> None:
        self.file.close()
        self.writer.close()


# -------------------------------------------------------------------------------- the job

@dataclass
class TrainJob:
    """What ``train.py`` hands to each process."""

    cfg: Config
    run_dir: Path
    resume: bool = False
    overwrite: bool = False
    result: dict = field(default_factory=dict)


class StopRequest:
    """SIGINT/SIGTERM set a flag; the trainer saves a checkpoint at the next step and stops."""

    def __init__(self):
        self.signal_name: str | None = None
        self._previous = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not in the main thread
                pass

    def _handle(self, signum, frame) -> None:
        if self.signal_name is not None:  # second signal: stop at once
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-256 of all parameters' bytes (to compare replicas)."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())  # 0-dim too
    return h.hexdigest()[:16]


def _score(cfg: Config, metrics: dict) -> float:
    """Higher is better for checkpoint selection and early stopping."""
    value = metrics[cfg.train.best_metric]
    return -value if cfg.train.best_metric == "loss" else value


def training(local_rank: int, job: TrainJob) -> None:
    """Train (or resume) the run in ``job.run_dir``; called once per process."""
    cfg, run_dir = job.cfg, Path(job.run_dir)
    rank, world = idist.get_rank(), idist.get_world_size()
    device = idist.device()
    ckpt_dir = run_dir / "checkpoints"
    is_main = rank == 0
    manual_seed(cfg.seed)
    if cfg.train.deterministic:
        torch.use_deterministic_algorithms(True)

    # Data: rank 0 fills the caches first, the others then read them.
    if not is_main:
        idist.barrier()
    data = prepare_data(cfg)
    if is_main:
        idist.barrier()
    tok = data.tokenizer
    train_split: EncodedSplit = data.encoded[cfg.data.train_split]
    valid_split: EncodedSplit = data.encoded[cfg.data.valid_split]
    train_loader = make_loader(train_split, tok, cfg.train, shuffle=True, seed=cfg.seed,
                               num_replicas=world, rank=rank)
    valid_loader = make_loader(valid_split, tok, cfg.train, shuffle=False, seed=cfg.seed,
                               num_replicas=world, rank=rank)
    sampler = train_loader.batch_sampler

    raw_model = build_model(cfg, tok).to(device)
    model = idist.auto_model(raw_model, sync_bn=False) if world > 1 else raw_model
    if cfg.train.compile:
        model = torch.compile(model)
    opt_cls = torch.optim.AdamW if cfg.train.optimizer == "adamw" else torch.optim.Adam
    optimizer = opt_cls(raw_model.parameters(), lr=cfg.train.lr, betas=tuple(cfg.train.betas),
                        eps=cfg.train.eps, weight_decay=cfg.train.weight_decay)
    optimizer = idist.auto_optim(optimizer)
    steps_per_epoch = max(1, len(train_loader) // cfg.train.accumulate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, steps_per_epoch))
    amp_dtype = autocast_dtype(cfg, device)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)

    trainer = create_trainer(model, optimizer, scheduler, scaler, cfg, tok.pad_id, device)
    evaluator = create_evaluator(model, cfg, tok.pad_id, device)
    accumulate = cfg.train.accumulate
    state = {"best": None, "saved_step": None}
    stopper = EarlyStopping(patience=max(cfg.train.patience, 1), score_function=lambda e: e.state.score,
                            trainer=trainer) if cfg.train.patience > 0 else None

    def updates() -> int:
        return trainer.state.iteration // accumulate

    def checkpoint() -> dict:
        return {"model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "trainer": trainer.state_dict(), "rng": rng_state(), "best": state["best"],
                "early_stopping": stopper.state_dict() if stopper else None, "step": updates()}

    resume_step = None
    if job.resume:
        ckpt = load_checkpoint(ckpt_dir / "last.pt", map_location=device)
        raw_model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        scaler.load_state_dict(ckpt["scaler"])
        trainer.load_state_dict(ckpt["trainer"])
        state["best"] = ckpt["best"]
        if stopper and ckpt["early_stopping"]:
            stopper.load_state_dict(ckpt["early_stopping"])
        resume_step = ckpt["step"]
        restored_rng = ckpt["rng"]
        if trainer.state.epoch_length != len(train_loader):
            raise UserError(f"cannot resume {run_dir}: the training data now gives {len(train_loader)} batches "
                            f"per epoch, the checkpoint was made with {trainer.state.epoch_length}")

    metrics_log = MetricsLog(run_dir, resume_step) if is_main else None
    if is_main:
        save_config(run_dir, cfg)
        if not job.resume:
            tok.save(run_dir / "tokenizer")
        write_manifest(run_dir, cfg, device, data.corpus[cfg.data.train_split].fingerprint(),
                       world_size=world, last_started=now(),
                       parameters=sum(p.numel() for p in raw_model.parameters()))

    @trainer.on(Events.EPOCH_STARTED)
    def position_sampler(engine: Engine) -> None:
        sampler.set_epoch(engine.state.epoch)
        sampler.start_at(engine.state.iteration % len(train_loader))

    stop = StopRequest()
    window = {"loss": 0.0, "tokens": 0, "batches": 0, "start": time.perf_counter()}

    @trainer.on(Events.ITERATION_COMPLETED)
    def track(engine: Engine) -> None:
        out = engine.state.output
        window["loss"] += out["loss"]
        window["tokens"] += out["ntokens"]
        window["batches"] += 1
        seconds = time.perf_counter() - window["start"]
        engine.state.metrics.update(loss=out["loss"], lr=out["lr"],
                                    tok_per_s=window["tokens"] * world / max(seconds, 1e-9))
        if engine.state.iteration % (cfg.train.log_every * accumulate) == 0:
            if is_main:
                metrics_log.write("train", updates(), epoch=engine.state.epoch,
                                  loss=window["loss"] / window["batches"], lr=out["lr"],
                                  grad_norm=out.get("grad_norm"), tokens_per_s=engine.state.metrics["tok_per_s"])
            window.update(loss=0.0, tokens=0, batches=0, start=time.perf_counter())
        if cfg.train.max_steps and updates() >= cfg.train.max_steps:
            engine.terminate()
        if stop.signal_name:
            engine.terminate()

    def save(kind: str) -> None:
        if not is_main:
            return
        ckpt = checkpoint()
        atomic_torch_save(ckpt, ckpt_dir / "last.pt")
        state["saved_step"] = updates()
        if kind in ("validation", "end") and cfg.train.keep_last > 0:
            atomic_torch_save(ckpt, ckpt_dir / f"step_{updates():08d}.pt")
            keep_last(ckpt_dir, cfg.train.keep_last)

    valid_sources = [valid_split.pair(i)[0] for i in range(len(valid_split))]
    n_bleu = cfg.train.valid_bleu_sentences or len(valid_sources)
    valid_refs = [data.corpus[cfg.data.valid_split].tgt[i] for i in valid_split.index[:n_bleu]]

    def validate(engine: Engine) -> None:
        state["validated_step"] = updates()
        evaluator.run(valid_loader)
        metrics = dict(evaluator.state.metrics["valid"])
        bleu = torch.tensor(0.0)
        signature = ""
        if is_main:
            hyps = translate_ids(raw_model, valid_sources[:n_bleu], tok, cfg.decode, device, beam=1)
            score = corpus_bleu(hyps, valid_refs)
            bleu, signature = torch.tensor(score.value), score.signature
        metrics["bleu"] = float(idist.broadcast(bleu, src=0)) if world > 1 else float(bleu)
        evaluator.state.score = _score(cfg, metrics)
        improved = state["best"] is None or evaluator.state.score > state["best"]
        if improved:
            state["best"] = evaluator.state.score
        if is_main:
            metrics_log.write("valid", updates(), epoch=engine.state.epoch, bleu_signature=signature,
                              best=improved, **metrics)
            log.info("step %d validation: loss %.3f ppl %.2f acc %.3f BLEU %.2f%s", updates(),
                     metrics["loss"], metrics["ppl"], metrics["accuracy"], metrics["bleu"],
                     " (best)" if improved else "")
        save("validation")
        if improved and is_main:
            atomic_torch_save({"model": raw_model.state_dict(), "step": updates(), "metrics": metrics},
                              ckpt_dir / "best.pt")
        if stopper:
            stopper(evaluator)

    if cfg.train.eval_every > 0:
        trainer.add_event_handler(Events.ITERATION_COMPLETED(every=cfg.train.eval_every * accumulate), validate)
    else:
        trainer.add_event_handler(Events.EPOCH_COMPLETED, validate)

    @trainer.on(Events.COMPLETED)
    def finish(engine: Engine) -> None:
        # A budget that is not a multiple of eval_every ends between validations: the final
        # weights are validated too, so best.pt can be the last update (not after a stop signal).
        if not stop.signal_name and state.get("validated_step") != updates():
            validate(engine)
        if state["saved_step"] != updates():
            save("signal" if stop.signal_name else "end")

    if is_main and sys.stderr.isatty():
        from ignite.handlers import ProgressBar

        ProgressBar(persist=False).attach(trainer, metric_names=["loss", "lr", "tok_per_s"])

    stop.install()
    try:
        if job.resume:
            set_rng_state(restored_rng)
        trainer.run(train_loader, max_epochs=max(cfg.train.max_epochs, trainer.state.epoch or 1))
    except NonFiniteLoss as err:
        kept = f"the last good checkpoint is {ckpt_dir / 'last.pt'} (step {state['saved_step']})" \
            if state["saved_step"] is not None or job.resume else "no checkpoint was written"
        raise NonFiniteLoss(f"{err}; {kept}") from None
    finally:
        stop.restore()
        if metrics_log:
            metrics_log.close()
    # Data parallelism must leave identical weights on every rank: record each rank's digest.
    digests = idist.all_gather(weights_digest(raw_model)) if world > 1 else [weights_digest(raw_model)]
    if is_main:
        write_manifest(run_dir, cfg, device, data.corpus[cfg.data.train_split].fingerprint(),
                       last_finished=now(), steps=updates(), rank_weight_digests=list(digests))
    job.result.update(steps=updates(), best=state["best"], interrupted=stop.signal_name)
    if world > 1:
        # Leave together: a rank that tears its process group down while rank 0 is still writing
        # can abort at exit ("terminate called without an active exception"), failing torchrun.
        idist.barrier()
    if stop.signal_name and is_main:
        print(f"{stop.signal_name}: stopped at step {updates()}; checkpoint {ckpt_dir / 'last.pt'} saved; "
              f"continue with: python train.py --resume {run_dir}", file=sys.stderr)
