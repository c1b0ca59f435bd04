"""Training a run: ``train(cfg, run_dir) -> TrainResult``, and what each process runs.

``train`` starts one process's worth of work under ``idist.Parallel`` (under torchrun, one per
device; each rank on its own shard of the batches, logging and checkpoints on rank 0 only).
``train_process`` builds the data, model, optimizer and the two engines (``training.engine``),
attaches the handlers (``training.handlers``) and runs.

Steps: ``train.max_steps`` counts optimizer updates (``train.accumulate`` batches each); ignite's
iteration counts batches. Exact resume: ``last.pt`` holds the model, optimizer, scheduler,
scaler, the engine state (iteration, epoch length), early-stopping state, every RNG state; the
batch sampler's position follows from the iteration, and each DataLoader draws from its own
generator so the global RNG sees the same calls in a resumed run as in an uninterrupted one.
"""
from __future__ import annotations

import gc
import hashlib
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.utils import manual_seed

from data.encoded import EncodedSplit
from data.pipeline import PreparedData, make_loader, prepare_data
from experiment.checkpoint import average_checkpoints, load_checkpoint, rng_state, set_rng_state, step_checkpoints
from experiment.config import Config, model_identity
from experiment.decode_config import resolve_settings
from experiment.manifest import Manifest, now, read_manifest, write_manifest
from experiment.run_dir import (
    RunDir,
    check_new_run,
    load_run_config,
    prepare_new_run,
    remove_temporaries,
    save_config,
)
from experiment.run_lock import RunLock
from experiment.trained import build_model, model_vocab
from training.engine import (
    PRECISION_NAMES,
    NonFiniteLoss,
    autocast_dtype,
    build_optimizer,
    create_evaluator,
    create_trainer,
    uses_cuda_graphs,
)
from training.handlers import (
    Checkpointer,
    MetricsLog,
    Progress,
    StepBudget,
    StopOnSignal,
    ThreadRebalance,
    ThroughputLogger,
    TrainState,
    Validator,
)
from training.schedules import lr_lambda
from utils.device import sharing_record
from utils.errors import UserError
from utils.io import atomic_torch_save
from utils.terminal import draws_in_place


@dataclass
class TrainResult:
    """How a training run ended: updates done, best validation score (higher is better; the
    negated loss when ``train.best_metric`` is loss) and the stop signal's name, if any."""

    run_dir: Path
    steps: int
    best: float | None
    interrupted: str | None


def train(cfg: Config, run_dir: Path, resume: bool = False, overwrite: bool = False,
          backend: str | None = None) -> TrainResult:
    """Train a new run in ``run_dir`` (an existing non-empty one needs ``overwrite``), or with
    ``resume`` continue it from checkpoints/last.pt. Under torchrun (WORLD_SIZE set) the ranks
    join one process group; otherwise one process on the default device.

    One writer per run: the run's lock (``experiment.run_lock``) is held throughout, so a second
    trainer on a live run stops with one line naming the holder. A finished run is final:
    resuming it changes nothing unless the config's budget (``train.max_steps``/``max_epochs``)
    is raised, which the manifest records as an extension.
    """
    run_dir = Path(run_dir)
    if int(os.environ.get("RANK", "0")) != 0:  # under torchrun, rank 0 holds the lock for all
        return _train_locked(cfg, run_dir, resume, overwrite, backend)
    with RunLock(run_dir):
        return _train_locked(cfg, run_dir, resume, overwrite, backend)


def extension_of(cfg: Config, run_dir: Path, manifest: Manifest) -> dict | None:
    """How ``cfg`` extends a finished run (``{"from_steps", "max_steps", "max_epochs", "at"}``), or
    None when its budget is the one the run finished with."""
    saved = load_run_config(run_dir).train
    if cfg.train.max_steps == saved.max_steps and cfg.train.max_epochs == saved.max_epochs:
        return None
    return {"from_steps": manifest.steps, "max_steps": cfg.train.max_steps,
            "max_epochs": cfg.train.max_epochs, "at": now()}


def refuse_flex_on_cpu(cfg: Config, device_type: str) -> None:
    """One line when ``model.attention_kernel: flex`` would train on a CPU, where FlexAttention has
    no backward (a flex run is tested on a CPU, not trained)."""
    if cfg.model.attention_kernel == "flex" and device_type == "cpu":
        raise UserError("model.attention_kernel=flex trains on a GPU only (FlexAttention has no backward on a CPU "
                        "in this PyTorch); train with model.attention_kernel=sdpa, or test a flex run here")


def _train_locked(cfg: Config, run_dir: Path, resume: bool, overwrite: bool, backend: str | None) -> TrainResult:
    refuse_flex_on_cpu(cfg, "cuda" if torch.cuda.is_available() else "cpu")  # before the run folder is made
    if resume and not RunDir(run_dir).last.is_file():
        if not RunDir(run_dir).config.is_file():
            raise UserError(f"cannot resume {run_dir}: no checkpoints/last.pt and no config.yaml")
        # stopped before its first checkpoint: nothing to continue from, so resuming is starting again
        print(f"{run_dir} has no checkpoint yet (stopped before its first one): starting it again from its "
              f"first update", file=sys.stderr)
        resume, overwrite = False, True
    if not resume:
        check_new_run(run_dir, overwrite)
    extension = None
    if resume:
        removed = remove_temporaries(run_dir)
        if removed:
            print(f"removed {len(removed)} temporary file(s) a stopped writer left in {run_dir}", file=sys.stderr)
        manifest = read_manifest(run_dir)
        if manifest.finished:
            extension = extension_of(cfg, run_dir, manifest)
            if extension is None:
                print(f"{run_dir} finished at step {manifest.steps} ({manifest.ended_by or 'its budget'}); "
                      f"nothing to do. A finished run is final: to extend it, resume it with a larger budget "
                      f"(train.max_steps=N)", file=sys.stderr)
                return TrainResult(run_dir, int(manifest.steps or 0), manifest.best_score, None)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    results: list[TrainResult] = []
    made: list[Path] = []  # the run directory, once this process has made it
    try:
        with idist.Parallel(backend=backend if distributed else None) as parallel:
            # ignite's launcher sets its own logger to INFO: it follows the "ignite" logger's level instead
            logging.getLogger("ignite.distributed.launcher.Parallel").setLevel(logging.getLogger("ignite").level)
            parallel.run(lambda local_rank: results.append(
                train_process(cfg, run_dir, resume, overwrite, extension, made.append)))
            # The session (the DDP model, whose reducer holds the process group, the engines) lives
            # on in reference cycles after train_process returns. Freed here, while the group and
            # the interpreter are alive; left to the exit, gloo's threads dropped their last tensors
            # during the interpreter's finalization, where a thread that asks for the GIL is ended
            # by pthread_exit — through C++'s noexcept frames, "terminate called without an active
            # exception" (rank 1 of the two-process test, about one run in 18).
            gc.collect()
    except BaseException:
        if made and not RunDir(run_dir).last.is_file():
            shutil.rmtree(run_dir, ignore_errors=True)  # a new run that failed before its first checkpoint
        raise
    return results[0]


def average(run_dir: Path, last: int) -> tuple[Path, list[Path]]:
    """Average the last ``last`` step checkpoints of a run into DIR/checkpoints/avg.pt;
    returns that path and the averaged checkpoints."""
    paths = step_checkpoints(RunDir(run_dir).checkpoints)[-last:]
    if not paths:
        raise UserError(f"no step_<N>.pt checkpoints in {RunDir(run_dir).checkpoints} to average")
    return atomic_torch_save(average_checkpoints(paths), RunDir(run_dir).checkpoint("avg")), paths


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-256 of all parameters' bytes (to compare replicas)."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())  # 0-dim too
    return h.hexdigest()[:16]


@dataclass
class _Session:
    """What one process trains with: the model (``raw_model`` unwrapped, ``model`` as the trainer
    calls it), the optimisation, the engines and the step bookkeeping."""

    raw_model: torch.nn.Module
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    amp_dtype: torch.dtype | None
    state: TrainState
    trainer: Engine
    evaluator: Engine


def build_session(cfg: Config, tok, device: torch.device, world: int, batches_per_epoch: int) -> _Session:
    """The model, optimizer, schedule, scaler, engines and state one process trains with: the one
    construction path (``train`` and ``gpu.check`` both call it)."""
    refuse_flex_on_cpu(cfg, device.type)
    raw_model = build_model(cfg, tok).to(device)
    model = idist.auto_model(raw_model, sync_bn=False) if world > 1 else raw_model
    if cfg.train.compile:
        model = torch.compile(model)
    optimizer = idist.auto_optim(build_optimizer(raw_model.parameters(), cfg.train, device))
    steps_per_epoch = max(1, batches_per_epoch // cfg.train.accumulate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, steps_per_epoch))
    amp_dtype = autocast_dtype(cfg.train, device)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    state = TrainState(accumulate=cfg.train.accumulate)
    trainer = create_trainer(model, optimizer, scheduler, scaler, cfg.train, tok.pad_id, device, state.guard)
    evaluator = create_evaluator(model, cfg.train, tok.pad_id, device)
    return _Session(raw_model, model, optimizer, scheduler, scaler, amp_dtype, state, trainer, evaluator)


def _restore(s: _Session, ckpt: dict, run_dir: Path, batches_per_epoch: int) -> None:
    """Put ``last.pt``'s model, optimisation and engine state back into the session, and the run's
    training time before this session."""
    s.raw_model.load_state_dict(ckpt["model"])
    s.optimizer.load_state_dict(ckpt["optimizer"])
    s.scheduler.load_state_dict(ckpt["scheduler"])
    s.scaler.load_state_dict(ckpt["scaler"])
    s.trainer.load_state_dict(ckpt["trainer"])
    s.state.best = ckpt["best"]
    # what was done at that step stays done: a run resumed at its budget validates and saves
    # only if the stopped session had not (it trains no further update: StepBudget)
    s.state.saved_step, s.state.validated_step = ckpt["step"], ckpt.get("validated")
    # A session ended by a kill (no signal handler runs) never wrote its time to the manifest;
    # the checkpoint it left carries the total up to that checkpoint.
    s.state.seconds_before = max(float(read_manifest(run_dir).train_seconds or 0.0),
                                 float(ckpt.get("train_seconds", 0.0)))
    if s.trainer.state.epoch_length != batches_per_epoch:
        raise UserError(f"cannot resume {run_dir}: the training data now gives {batches_per_epoch} batches "
                        f"per epoch, the checkpoint was made with {s.trainer.state.epoch_length}")


def _attach_handlers(cfg: Config, s: _Session, validator: Validator, metrics_log: MetricsLog | None,
                     train_loader, world: int, is_main: bool) -> StopOnSignal:
    """The sampler's position, throughput log, step budget, signals, validation and the thread share
    (``--threads auto``) on the trainer; returns the signal handler (installed around the run)."""
    sampler = train_loader.batch_sampler

    @s.trainer.on(Events.EPOCH_STARTED)
    def position_sampler(engine: Engine) -> None:
        sampler.set_epoch(engine.state.epoch)
        sampler.start_at(engine.state.iteration % len(train_loader))

    stop = StopOnSignal(s.state)
    for handler in (ThroughputLogger(s.state, metrics_log, cfg.train.log_every, world),
                    StepBudget(s.state, cfg.train.max_steps), stop, validator, ThreadRebalance(s.state)):
        handler.attach(s.trainer)
    if is_main:
        Progress(s.state, cfg.train.max_steps, terminal=draws_in_place()).attach(s.trainer)
    return stop


def _validator(cfg: Config, s: _Session, data: PreparedData, valid_loader, checkpointer: Checkpointer,
               metrics_log: MetricsLog | None, device: torch.device) -> Validator:
    """Validation: loss, perplexity and accuracy on the whole split, greedy BLEU on its first
    ``train.valid_bleu_sentences`` (0: all), checkpoints and early stopping."""
    split = data.encoded[cfg.data.valid_split]
    n_bleu = min(cfg.train.valid_bleu_sentences or len(split), len(split))
    refs = [data.corpus[cfg.data.valid_split].tgt[i] for i in split.index[:n_bleu]]
    return Validator(s.state, s.evaluator, valid_loader, s.raw_model, data.tokenizer,
                     [split.pair(i)[0] for i in range(n_bleu)], refs, resolve_settings(cfg.decode, greedy=True),
                     cfg.train, checkpointer, metrics_log, device, s.trainer)


def _record_start(cfg: Config, s: _Session, run_dir: Path, tok, device: torch.device, fingerprint: str,
                  world: int, resume: bool, extension: dict | None, train: EncodedSplit) -> None:
    """Rank 0, before the first update: the resolved config, a new run's tokenizer, the manifest
    (with the longest pair of the encoded training split ``train`` in tokens) and the log's line on
    the threads (``utils.threads``: what the command chose and why)."""
    sharing = sharing_record()
    if sharing["thread_choice"]:
        logging.getLogger(__name__).info("threads: %s", sharing["thread_choice"])
    longest = {"source": int(train.src_lengths.max(initial=0)), "target": int(train.tgt_lengths.max(initial=0))}
    save_config(run_dir, cfg)
    if not resume:
        tok.save(RunDir(run_dir).tokenizer)
    extended = {}
    if extension:  # recorded, and no longer finished until the extension ends
        extended = {"extensions": [*read_manifest(run_dir).extensions, extension], "last_finished": None}
    write_manifest(run_dir, cfg, device, fingerprint, world_size=world, last_started=now(),
                   precision=PRECISION_NAMES[s.amp_dtype], update=update_record(cfg, device),
                   parameters=sum(p.numel() for p in s.raw_model.parameters()), longest_training_tokens=longest,
                   **sharing, **extended)


def update_record(cfg: Config, device: torch.device, captured=None) -> dict:
    """How the run's updates were computed, for its manifest: the recipe's step options as they
    took effect on ``device`` (``cuda_graphs`` does nothing on a CPU) and, with graphs, how many
    batch shapes were captured and why capturing stopped, if it did (``captured``: the trainer's
    ``CapturedUpdate``)."""
    record = {"static_shapes": cfg.train.static_shapes, "fused_optimizer": cfg.train.fused_optimizer,
              "cuda_graphs": uses_cuda_graphs(cfg.train, device)}
    if captured is not None:
        record.update(captured_shapes=captured.captured, capture_failure=captured.failure)
    return record


def _run(cfg: Config, s: _Session, train_loader, stop: StopOnSignal, metrics_log: MetricsLog | None,
         ckpt: dict | None, run: RunDir) -> None:
    """The trainer's run, with the signal handlers installed and the metrics log closed after; a
    non-finite loss names the last good checkpoint."""
    stop.install()
    try:
        if ckpt is not None:
            set_rng_state(ckpt["rng"])
        s.trainer.run(train_loader, max_epochs=max(cfg.train.max_epochs, s.trainer.state.epoch or 1))
    except NonFiniteLoss as err:
        kept = f"the last good checkpoint is {run.last} (step {s.state.saved_step})" \
            if s.state.saved_step is not None or ckpt is not None else "no checkpoint was written"
        raise NonFiniteLoss(f"{err}; {kept}") from None
    finally:
        stop.restore()
        if metrics_log:
            metrics_log.close()


def _ended(cfg: Config, s: _Session, validator: Validator, steps: int) -> dict:
    """The manifest fields that say how this session ended. A run stopped by a signal is not
    finished: the study driver resumes it rather than keep it."""
    if s.state.stop_signal:
        return {"last_stopped": now(), "stopped_by": s.state.stop_signal}
    stopper = validator.stopper
    stopped_early = stopper is not None and stopper.counter >= stopper.patience
    return {"last_finished": now(), "stopped_by": None, "best_score": s.state.best,
            "ended_by": "max_steps" if cfg.train.max_steps and steps >= cfg.train.max_steps
            else "early_stopping" if stopped_early else "max_epochs"}


def _data_and_loaders(cfg: Config, device: torch.device, rank: int, world: int):
    """The run's prepared data (rank 0 fills the caches first, the others then read them) and this
    rank's loaders of its training split (shuffled) and validation split."""
    if rank != 0:
        idist.barrier()
    data = prepare_data(cfg.data, cfg.tokenizer, cfg.seed)
    if rank == 0:
        idist.barrier()
    train_split, valid_split = data.encoded[cfg.data.train_split], data.encoded[cfg.data.valid_split]
    pin = device.type == "cuda"  # page-locked batches: the trainer copies them non-blocking
    train_loader, valid_loader = (make_loader(split, data.tokenizer, cfg.train, shuffle=shuffle, seed=cfg.seed,
                                              num_replicas=world, rank=rank, pin_memory=pin)
                                  for split, shuffle in ((train_split, True), (valid_split, False)))
    return data, train_loader, valid_loader


def train_process(cfg: Config, run_dir: Path, resume: bool = False, overwrite: bool = False,
                  extension: dict | None = None, made: Callable[[Path], None] | None = None) -> TrainResult:
    """Train (or resume) the run in ``run_dir``: what one process (rank) runs. A new run's
    directory is created only once the data and the model have been built."""
    rank, world = idist.get_rank(), idist.get_world_size()
    device, run, is_main = idist.device(), RunDir(run_dir), rank == 0
    manual_seed(cfg.seed)
    if cfg.train.deterministic:
        torch.use_deterministic_algorithms(True)
    data, train_loader, valid_loader = _data_and_loaders(cfg, device, rank, world)
    tok = data.tokenizer
    s = build_session(cfg, tok, device, world, len(train_loader))
    identity = {"model_config": model_identity(cfg), "vocab": model_vocab(tok)}  # what load_run checks

    def snapshot() -> dict:
        return {**identity, "model": s.raw_model.state_dict(), "optimizer": s.optimizer.state_dict(),
                "scheduler": s.scheduler.state_dict(), "scaler": s.scaler.state_dict(),
                "trainer": s.trainer.state_dict(), "rng": rng_state(), "best": s.state.best,
                "early_stopping": validator.stopper.state_dict() if validator.stopper else None,
                "step": s.state.updates(s.trainer), "validated": s.state.validated_step,
                "train_seconds": s.state.train_seconds()}

    checkpointer = Checkpointer(s.state, run, snapshot, s.raw_model, cfg.train.keep_last, is_main, identity)
    ckpt = load_checkpoint(run.last, map_location=device) if resume else None
    if ckpt is not None:
        _restore(s, ckpt, run_dir, len(train_loader))
    if is_main and not resume:
        prepare_new_run(run_dir, overwrite)
        if made:
            made(run_dir)
    metrics_log = MetricsLog(run_dir, ckpt["step"] if ckpt else None) if is_main else None
    validator = _validator(cfg, s, data, valid_loader, checkpointer, metrics_log, device)
    if ckpt is not None and validator.stopper and ckpt["early_stopping"]:
        validator.stopper.load_state_dict(ckpt["early_stopping"])
    fingerprint = data.corpus[cfg.data.train_split].fingerprint()
    if is_main:
        _record_start(cfg, s, run_dir, tok, device, fingerprint, world, resume, extension,
                      data.encoded[cfg.data.train_split])
    stop = _attach_handlers(cfg, s, validator, metrics_log, train_loader, world, is_main)
    s.state.session_start = time.monotonic()
    _run(cfg, s, train_loader, stop, metrics_log, ckpt, run)
    steps = s.state.updates(s.trainer)
    # Data parallelism must leave identical weights on every rank: record each rank's digest.
    digests = idist.all_gather(weights_digest(s.raw_model)) if world > 1 else [weights_digest(s.raw_model)]
    if is_main:
        write_manifest(run_dir, cfg, device, fingerprint, train_seconds=s.state.train_seconds(),
                       update=update_record(cfg, device, getattr(s.trainer, "captured", None)), steps=steps,
                       rank_weight_digests=list(digests), **_ended(cfg, s, validator, steps),
                       thread_changes=[*(read_manifest(run_dir).thread_changes or []), *s.state.thread_changes] or None)
    if world > 1:
        # Leave together: a rank that tears its process group down while rank 0 is still writing
        # can abort at exit ("terminate called without an active exception"), failing torchrun.
        idist.barrier()
    if s.state.stop_signal and is_main:
        print(f"{s.state.stop_signal}: stopped at step {steps}; checkpoint {run.last} saved; "
              f"continue with: python train.py --resume {run_dir}", file=sys.stderr)
    return TrainResult(run_dir, steps, s.state.best, s.state.stop_signal)
