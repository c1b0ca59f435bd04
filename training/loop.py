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

import hashlib
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.utils import manual_seed

from data.pipeline import make_loader, prepare_data
from experiment.checkpoint import average_checkpoints, load_checkpoint, rng_state, set_rng_state, step_checkpoints
from experiment.config import Config, to_dict
from experiment.run_dir import (check_new_run, is_finished, load_run_config, now, prepare_new_run, read_manifest,
                                remove_temporaries, save_config, write_manifest)
from experiment.run_lock import RunLock
from experiment.trained import build_model, model_vocab
from search.settings import DecodeSettings
from training.engine import PRECISION_NAMES, NonFiniteLoss, autocast_dtype, create_evaluator, create_trainer
from training.handlers import (Checkpointer, MetricsLog, StepBudget, StopOnSignal, ThroughputLogger, TrainState,
                               Validator)
from training.schedules import lr_lambda
from utils.errors import UserError
from utils.io import atomic_torch_save


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


def extension_of(cfg: Config, run_dir: Path, manifest: dict) -> dict | None:
    """How ``cfg`` extends a finished run (``{"from_steps", "max_steps", "max_epochs", "at"}``), or
    None when its budget is the one the run finished with."""
    saved = load_run_config(run_dir).train
    if cfg.train.max_steps == saved.max_steps and cfg.train.max_epochs == saved.max_epochs:
        return None
    return {"from_steps": manifest.get("steps"), "max_steps": cfg.train.max_steps,
            "max_epochs": cfg.train.max_epochs, "at": now()}


def _train_locked(cfg: Config, run_dir: Path, resume: bool, overwrite: bool, backend: str | None) -> TrainResult:
    if resume and not (run_dir / "checkpoints" / "last.pt").is_file():
        if not (run_dir / "config.yaml").is_file():
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
        if is_finished(manifest):
            extension = extension_of(cfg, run_dir, manifest)
            if extension is None:
                print(f"{run_dir} finished at step {manifest.get('steps')} ({manifest.get('ended_by', 'its budget')}); "
                      f"nothing to do. A finished run is final: to extend it, resume it with a larger budget "
                      f"(train.max_steps=N)", file=sys.stderr)
                return TrainResult(run_dir, int(manifest.get("steps") or 0), manifest.get("best_score"), None)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    results: list[TrainResult] = []
    made: list[Path] = []  # the run directory, once this process has made it
    try:
        with idist.Parallel(backend=backend if distributed else None) as parallel:
            parallel.run(lambda local_rank: results.append(
                train_process(cfg, run_dir, resume, overwrite, extension, made.append)))
    except BaseException:
        if made and not (run_dir / "checkpoints" / "last.pt").is_file():
            shutil.rmtree(run_dir, ignore_errors=True)  # a new run that failed before its first checkpoint
        raise
    return results[0]


def average(run_dir: Path, last: int) -> tuple[Path, list[Path]]:
    """Average the last ``last`` step checkpoints of a run into DIR/checkpoints/avg.pt;
    returns that path and the averaged checkpoints."""
    paths = step_checkpoints(Path(run_dir) / "checkpoints")[-last:]
    if not paths:
        raise UserError(f"no step_<N>.pt checkpoints in {Path(run_dir) / 'checkpoints'} to average")
    return atomic_torch_save(average_checkpoints(paths), Path(run_dir) / "checkpoints" / "avg.pt"), paths


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-256 of all parameters' bytes (to compare replicas)."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes())  # 0-dim too
    return h.hexdigest()[:16]


def train_process(cfg: Config, run_dir: Path, resume: bool = False, overwrite: bool = False,
                  extension: dict | None = None, made: Callable[[Path], None] | None = None) -> TrainResult:
    """Train (or resume) the run in ``run_dir``: what one process (rank) runs. A new run's
    directory is created only once the data and the model have been built."""
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
    data = prepare_data(cfg.data, cfg.tokenizer, cfg.seed)
    if is_main:
        idist.barrier()
    tok = data.tokenizer
    train_split, valid_split = data.encoded[cfg.data.train_split], data.encoded[cfg.data.valid_split]
    pin = device.type == "cuda"  # page-locked batches: the trainer copies them non-blocking
    train_loader = make_loader(train_split, tok, cfg.train, shuffle=True, seed=cfg.seed,
                               num_replicas=world, rank=rank, pin_memory=pin)
    valid_loader = make_loader(valid_split, tok, cfg.train, shuffle=False, seed=cfg.seed,
                               num_replicas=world, rank=rank, pin_memory=pin)

    raw_model = build_model(cfg, tok).to(device)
    model = idist.auto_model(raw_model, sync_bn=False) if world > 1 else raw_model
    if cfg.train.compile:
        model = torch.compile(model)
    opt_cls = torch.optim.AdamW if cfg.train.optimizer == "adamw" else torch.optim.Adam
    optimizer = idist.auto_optim(opt_cls(raw_model.parameters(), lr=cfg.train.lr, betas=tuple(cfg.train.betas),
                                         eps=cfg.train.eps, weight_decay=cfg.train.weight_decay))
    steps_per_epoch = max(1, len(train_loader) // cfg.train.accumulate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, steps_per_epoch))
    amp_dtype = autocast_dtype(cfg.train, device)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype == torch.float16)
    state = TrainState(accumulate=cfg.train.accumulate)
    trainer = create_trainer(model, optimizer, scheduler, scaler, cfg.train, tok.pad_id, device, state.guard)
    evaluator = create_evaluator(model, cfg.train, tok.pad_id, device)

    n_bleu = min(cfg.train.valid_bleu_sentences or len(valid_split), len(valid_split))
    valid_refs = [data.corpus[cfg.data.valid_split].tgt[i] for i in valid_split.index[:n_bleu]]
    greedy = DecodeSettings(beam=1, max_len_a=cfg.decode.max_len_a, max_len_b=cfg.decode.max_len_b,
                            batch_size=cfg.decode.batch_size)

    identity = {"model_config": to_dict(cfg.model), "vocab": model_vocab(tok)}  # what load_run checks

    def snapshot() -> dict:
        return {**identity, "model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
                "trainer": trainer.state_dict(), "rng": rng_state(), "best": state.best,
                "early_stopping": validator.stopper.state_dict() if validator.stopper else None,
                "step": state.updates(trainer), "validated": state.validated_step}

    checkpointer = Checkpointer(state, ckpt_dir, snapshot, raw_model, cfg.train.keep_last, is_main, identity)
    resume_step, restored_rng = None, None
    if resume:
        ckpt = load_checkpoint(ckpt_dir / "last.pt", map_location=device)
        raw_model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        scaler.load_state_dict(ckpt["scaler"])
        trainer.load_state_dict(ckpt["trainer"])
        state.best, resume_step, restored_rng = ckpt["best"], ckpt["step"], ckpt["rng"]
        # what was done at that step stays done: a run resumed at its budget validates and saves
        # only if the stopped session had not (it trains no further update: StepBudget)
        state.saved_step, state.validated_step = resume_step, ckpt.get("validated")
        if trainer.state.epoch_length != len(train_loader):
            raise UserError(f"cannot resume {run_dir}: the training data now gives {len(train_loader)} batches "
                            f"per epoch, the checkpoint was made with {trainer.state.epoch_length}")

    if is_main and not resume:
        prepare_new_run(run_dir, overwrite)
        if made:
            made(run_dir)
    metrics_log = MetricsLog(run_dir, resume_step) if is_main else None
    validator = Validator(state, evaluator, valid_loader, raw_model, tok,
                          [valid_split.pair(i)[0] for i in range(n_bleu)], valid_refs, greedy, cfg.train,
                          checkpointer, metrics_log, device, trainer)
    if resume and validator.stopper and ckpt["early_stopping"]:
        validator.stopper.load_state_dict(ckpt["early_stopping"])
    if is_main:
        save_config(run_dir, cfg)
        if not resume:
            tok.save(run_dir / "tokenizer")
        extended = {}
        if extension:  # recorded, and no longer finished until the extension ends
            extended = {"extensions": read_manifest(run_dir).get("extensions", []) + [extension],
                        "last_finished": None}
        write_manifest(run_dir, cfg, device, data.corpus[cfg.data.train_split].fingerprint(),
                       world_size=world, last_started=now(), precision=PRECISION_NAMES[amp_dtype],
                       parameters=sum(p.numel() for p in raw_model.parameters()), **extended)

    sampler = train_loader.batch_sampler

    @trainer.on(Events.EPOCH_STARTED)
    def position_sampler(engine: Engine) -> None:
        sampler.set_epoch(engine.state.epoch)
        sampler.start_at(engine.state.iteration % len(train_loader))

    stop = StopOnSignal(state)
    for handler in (ThroughputLogger(state, metrics_log, cfg.train.log_every, world),
                    StepBudget(state, cfg.train.max_steps), stop, validator):
        handler.attach(trainer)
    if is_main and sys.stderr.isatty():
        from ignite.handlers import ProgressBar

        ProgressBar(persist=False).attach(trainer, metric_names=["loss", "lr", "tok_per_s"])

    stop.install()
    session_start = time.monotonic()
    try:
        if restored_rng is not None:
            set_rng_state(restored_rng)
        trainer.run(train_loader, max_epochs=max(cfg.train.max_epochs, trainer.state.epoch or 1))
    except NonFiniteLoss as err:
        kept = f"the last good checkpoint is {ckpt_dir / 'last.pt'} (step {state.saved_step})" \
            if state.saved_step is not None or resume else "no checkpoint was written"
        raise NonFiniteLoss(f"{err}; {kept}") from None
    finally:
        stop.restore()
        if metrics_log:
            metrics_log.close()
    steps = state.updates(trainer)
    # Data parallelism must leave identical weights on every rank: record each rank's digest.
    digests = idist.all_gather(weights_digest(raw_model)) if world > 1 else [weights_digest(raw_model)]
    if is_main:
        # A run stopped by a signal is not finished: the study driver resumes it rather than keep it.
        if state.stop_signal:
            ended = {"last_stopped": now(), "stopped_by": state.stop_signal}
        else:
            stopped_early = validator.stopper is not None and validator.stopper.counter >= validator.stopper.patience
            ended = {"last_finished": now(), "stopped_by": None, "best_score": state.best,
                     "ended_by": "max_steps" if cfg.train.max_steps and steps >= cfg.train.max_steps
                     else "early_stopping" if stopped_early else "max_epochs"}
        write_manifest(run_dir, cfg, device, data.corpus[cfg.data.train_split].fingerprint(),
                       train_seconds=time.monotonic() - session_start, steps=steps,
                       rank_weight_digests=list(digests), **ended)
    if world > 1:
        # Leave together: a rank that tears its process group down while rank 0 is still writing
        # can abort at exit ("terminate called without an active exception"), failing torchrun.
        idist.barrier()
    if state.stop_signal and is_main:
        print(f"{state.stop_signal}: stopped at step {steps}; checkpoint {ckpt_dir / 'last.pt'} saved; "
              f"continue with: python train.py --resume {run_dir}", file=sys.stderr)
    return TrainResult(run_dir, steps, state.best, state.stop_signal)
