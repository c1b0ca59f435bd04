"""The trainer's handlers, each one job, attached to ignite events over an explicit ``TrainState``.

| handler | event | job |
| --- | --- | --- |
| ``MetricsLog`` | (called by the others) | DIR/metrics.jsonl and TensorBoard scalars |
| ``ThroughputLogger`` | every batch | running loss and tokens/s; a "train" point every ``log_every`` updates |
| ``Progress`` | every batch | a bar over the budget (terminal), or a line a minute with rate and time left |
| ``StepBudget`` | every batch | ends training at ``train.max_steps`` updates |
| ``StopOnSignal`` | every batch | SIGINT/SIGTERM/SIGUSR2: end training at the next step (a checkpoint follows) |
| ``Checkpointer`` | (called by the others) | last.pt, the last k step_<N>.pt, best.pt (rank 0, atomic) |
| ``Validator`` | every ``eval_every`` updates (or epoch), and at the end | loss/ppl/accuracy, greedy BLEU, best, early stopping |

Order matters where two run on the same event: they are attached in the order above, so a
validation that falls on the last update sees the budget reached and is not repeated at the end.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import ignite.distributed as idist
import torch
from ignite.engine import Engine, Events
from ignite.handlers import EarlyStopping

from experiment.checkpoint import keep_last, step_checkpoint_name
from experiment.decode_config import DecodeConfig
from experiment.run_dir import RunDir, read_metrics_log
from experiment.train_config import TrainConfig
from scoring.metrics import corpus_bleu
from search.translate import best_texts, translate
from training.engine import NonFiniteGuard
from utils.errors import ResourceError, resource_error
from utils.io import atomic_torch_save, atomic_write_text
from utils.threads import REBALANCE_EVERY_S, rebalance

log = logging.getLogger(__name__)


@dataclass
class TrainState:
    """What the handlers share, besides the engines: the best validation score so far (higher is
    better), the update of the last checkpoint and of the last validation, the stop signal, and
    the non-finite-loss guard the trainer feeds (checked at log points, validations, checkpoints)."""

    accumulate: int = 1
    best: float | None = None
    saved_step: int | None = None
    validated_step: int | None = None
    stop_signal: str | None = None
    guard: NonFiniteGuard = field(default_factory=NonFiniteGuard)
    seconds_before: float = 0.0  # training wall time of the run's earlier sessions
    thread_changes: list[dict] = field(default_factory=list)  # this session's re-divisions (ThreadRebalance)
    session_start: float | None = None  # time.monotonic() when this session's updates began

    def updates(self, trainer: Engine) -> int:
        """Optimizer updates done (ignite counts batches; ``accumulate`` batches make an update)."""
        return trainer.state.iteration // self.accumulate

    def train_seconds(self) -> float:
        """The run's training wall time so far: its earlier sessions and this one's."""
        now = time.monotonic()
        return self.seconds_before + (now - self.session_start if self.session_start is not None else 0.0)


class MetricsLog:
    """DIR/metrics.jsonl (one JSON object per point) and TensorBoard scalars under DIR/logs.

    A point is appended whole or not at all: a write the machine refuses (disk full, file too
    large) is rolled back to the previous end of the file and raised as one ``ResourceError``
    naming the file, as is a failure of TensorBoard's writer (which reports its background
    thread's error at the next call).
    """

    def __init__(self, run_dir: Path, resume_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.path = RunDir(run_dir).metrics
        self.logs = RunDir(run_dir).logs
        if resume_step is not None and self.path.is_file():
            # drop points logged after the checkpoint we resume from (they will be logged again)
            kept = [point for point in read_metrics_log(run_dir) if point["step"] <= resume_step]
            atomic_write_text(self.path, "".join(json.dumps(point) + "\n" for point in kept))
        try:
            self.file = open(self.path, "ab", buffering=0)
        except OSError as err:
            raise resource_error(self.path, err) from None
        with self._tensorboard():
            self.writer = SummaryWriter(str(self.logs), purge_step=resume_step)

    @contextlib.contextmanager
    def _tensorboard(self):
        try:
            yield
        except Exception as err:  # noqa: BLE001 (the writer's thread re-raises whatever stopped it)
            if isinstance(err, OSError):
                raise resource_error(f"TensorBoard log {self.logs}", err) from None
            raise ResourceError(f"cannot write TensorBoard log {self.logs}: {str(err)[:200]}") from None

    def write(self, kind: str, step: int, **values) -> None:
        record = {"kind": kind, "step": step, "time": round(time.time(), 3), **values}
        data, end = (json.dumps(record) + "\n").encode("utf-8"), os.fstat(self.file.fileno()).st_size
        try:
            written = 0
            while written < len(data):
                written += self.file.write(data[written:])
        except OSError as err:
            try:
                os.ftruncate(self.file.fileno(), end)  # no half line under the real name
            except OSError:
                pass
            raise resource_error(self.path, err) from None
        with self._tensorboard():
            for key, value in values.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.writer.add_scalar(f"{kind}/{key}", value, step)

    def close(self) -> None:
        self.file.close()
        with self._tensorboard():
            self.writer.close()


class ThroughputLogger:
    """Running training loss and target tokens/s (all ranks) in ``engine.state.metrics`` (for the
    progress bar), and a "train" point in the metrics log every ``log_every`` updates."""

    def __init__(self, state: TrainState, metrics_log: MetricsLog | None, log_every: int, world_size: int):
        self.state, self.metrics_log, self.world = state, metrics_log, world_size
        self.every = log_every * state.accumulate
        self._reset()

    def _reset(self) -> None:
        self.loss, self.tokens, self.batches, self.start = 0.0, 0, 0, time.perf_counter()

    def attach(self, trainer: Engine) -> None:
        trainer.add_event_handler(Events.ITERATION_COMPLETED, self)

    def __call__(self, engine: Engine) -> None:
        out = engine.state.output
        self.loss = out["loss"] + self.loss  # summed on the device; read at the log point
        self.tokens += out["ntokens"]
        self.batches += 1
        seconds = time.perf_counter() - self.start
        engine.state.metrics.update(loss=out["loss"], lr=out["lr"],  # the progress bar (a terminal) reads loss
                                    tok_per_s=self.tokens * self.world / max(seconds, 1e-9))
        if engine.state.iteration % self.every == 0:
            self.state.guard.check()
            if self.metrics_log is not None:
                norm = out.get("grad_norm")
                self.metrics_log.write("train", self.state.updates(engine), epoch=engine.state.epoch,
                                       loss=float(self.loss) / self.batches, lr=out["lr"],
                                       grad_norm=None if norm is None else float(norm),
                                       tokens_per_s=engine.state.metrics["tok_per_s"])
            self._reset()


class ThreadRebalance:
    """Under ``--threads auto``, the process's share of the cores taken anew as the suite's processes
    on the machine come and go: before the first update (runs launched together have all registered
    by then; nothing computed yet, so nothing to record), then every ``utils.threads.REBALANCE_EVERY_S``
    seconds, each change recorded (``TrainState.thread_changes``, the manifest's ``thread_changes``)."""

    def __init__(self, state: TrainState, every_s: float = REBALANCE_EVERY_S):
        self.state, self.every_s, self.last = state, every_s, time.monotonic()

    def attach(self, trainer: Engine) -> None:
        trainer.add_event_handler(Events.STARTED, self.before_training)
        trainer.add_event_handler(Events.ITERATION_COMPLETED, self)

    def before_training(self, engine: Engine) -> None:
        rebalance()
        self.last = time.monotonic()

    def __call__(self, engine: Engine) -> None:
        if time.monotonic() - self.last >= self.every_s:
            before = torch.get_num_threads()
            now = rebalance()
            if now is not None and now != before:  # recorded: the run's arithmetic is of no one thread count
                self.state.thread_changes.append({"update": self.state.updates(engine), "threads": now})
            self.last = time.monotonic()


def _duration(seconds: float) -> str:
    """``1 h 04 min``, ``3 min 10 s``, ``42 s``."""
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


class Progress:
    """What a person watching a run sees, in updates of its budget (``max_steps``; 0: none, so no
    total): on a terminal (``terminal``) a bar redrawn in place, the log's lines written above it;
    elsewhere (a log file, a job's output) a line every ``every`` seconds — "update 150 of 300 (50%),
    2.1 updates/s, about 1 min 11 s left"."""

    def __init__(self, state: TrainState, max_steps: int, terminal: bool, every: float = 60.0):
        self.state, self.max_steps, self.terminal, self.every = state, max_steps, terminal, every
        self.bar, self.redirect = None, None
        self.start = self.first = self.last_line = 0.0

    def attach(self, trainer: Engine) -> None:
        trainer.add_event_handler(Events.STARTED, self.started)
        trainer.add_event_handler(Events.ITERATION_COMPLETED, self.step)
        trainer.add_event_handler(Events.TERMINATE, self.close)
        trainer.add_event_handler(Events.COMPLETED, self.close)
        trainer.add_event_handler(Events.EXCEPTION_RAISED, self.failed)

    def started(self, engine: Engine) -> None:
        self.start = self.last_line = time.monotonic()
        self.first = self.state.updates(engine)
        log.info(f"training from update {self.first} to {self.max_steps or 'the end of its epochs'}")
        if self.terminal:
            from tqdm import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self.bar = tqdm(total=self.max_steps or None, initial=self.first, unit="update", dynamic_ncols=True,
                            leave=False)
            self.redirect = logging_redirect_tqdm()
            self.redirect.__enter__()

    def line(self, done: int) -> str:
        """The progress at ``done`` updates, as a log line shows it."""
        rate = (done - self.first) / max(time.monotonic() - self.start, 1e-9)
        if not self.max_steps:
            return f"update {done}, {rate:.2f} updates/s"
        left = f", about {_duration((self.max_steps - done) / rate)} left" if rate > 0 else ""
        return f"update {done} of {self.max_steps} ({100 * done / self.max_steps:.0f}%), {rate:.2f} updates/s{left}"

    def step(self, engine: Engine) -> None:
        if engine.state.iteration % self.state.accumulate:
            return
        done = self.state.updates(engine)
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            loss = engine.state.metrics.get("loss")
            if loss is not None and done % 10 == 0:
                self.bar.set_postfix(loss=f"{float(loss):.3f}", refresh=False)
        elif time.monotonic() - self.last_line >= self.every:
            self.last_line = time.monotonic()
            log.info(self.line(done))

    def close(self, engine: Engine | None = None) -> None:
        if self.bar is not None:
            self.bar.close()
            self.redirect.__exit__(None, None, None)
            self.bar = self.redirect = None

    def failed(self, engine: Engine, error: BaseException) -> None:
        """The bar closed, then the error raised on (ignite raises it only where no handler takes it)."""
        self.close()
        raise error


class StepBudget:
    """Ends training once ``max_steps`` updates are done (0: no budget); a run resumed at its
    budget (stopped by a signal after its last update) ends before any further update."""

    def __init__(self, state: TrainState, max_steps: int):
        self.state, self.max_steps = state, max_steps

    def attach(self, trainer: Engine) -> None:
        trainer.add_event_handler(Events.STARTED, self)
        trainer.add_event_handler(Events.ITERATION_COMPLETED, self)

    def __call__(self, engine: Engine) -> None:
        if self.max_steps and self.state.updates(engine) >= self.max_steps:
            engine.terminate()


class StopOnSignal:
    """SIGINT/SIGTERM, and SIGUSR2 (a scheduler's warning before its time limit: SLURM's
    ``--signal=USR2@<seconds>``, which submitit asks for), record the signal's name in the state;
    training ends after the current step (the end-of-training checkpoint follows). A second signal
    stops at once. A SIGINT ignored when training starts stays ignored, as ``nohup`` and a shell's
    background jobs expect (and Python itself does): a study's detached jobs leave the terminal's
    Ctrl-C to the command that watches them."""

    def __init__(self, state: TrainState):
        self.state = state
        self._previous: dict = {}

    def attach(self, trainer: Engine) -> None:
        trainer.add_event_handler(Events.ITERATION_COMPLETED, self)

    def __call__(self, engine: Engine) -> None:
        if self.state.stop_signal:
            engine.terminate()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2):
            if sig == signal.SIGINT and signal.getsignal(sig) == signal.SIG_IGN:
                continue
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not in the main thread
                pass

    def _handle(self, signum, frame) -> None:
        if self.state.stop_signal is not None:  # second signal: stop at once
            raise KeyboardInterrupt
        self.state.stop_signal = signal.Signals(signum).name

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class Checkpointer:
    """Writes DIR/checkpoints/ on rank 0: last.pt always, a step_<N>.pt copy (the last
    ``keep_last`` kept) at validations and at the end, best.pt (model and metrics) on request."""

    def __init__(self, state: TrainState, run: RunDir, snapshot: Callable[[], dict], model: torch.nn.Module,
                 keep_last: int, is_main: bool, identity: dict | None = None):
        self.state, self.run, self.snapshot, self.model = state, run, snapshot, model
        self.keep_last, self.is_main, self.identity = keep_last, is_main, identity or {}

    def save(self, step: int, kind: str) -> None:
        """``kind``: "validation", "end" (also a step_<N>.pt copy) or "signal" (last.pt only).
        Never weights updated from a non-finite loss: the guard is checked first (every rank)."""
        self.state.guard.check()
        if not self.is_main:
            return
        ckpt = self.snapshot()
        atomic_torch_save(ckpt, self.run.last)
        self.state.saved_step = step
        if kind in ("validation", "end") and self.keep_last > 0:
            atomic_torch_save(ckpt, self.run.checkpoints / step_checkpoint_name(step))
            keep_last(self.run.checkpoints, self.keep_last)

    def save_best(self, step: int, metrics: dict) -> None:
        if self.is_main:
            atomic_torch_save({**self.identity, "model": self.model.state_dict(), "step": step, "metrics": metrics},
                              self.run.best)


class Validator:
    """Validation: the evaluator's teacher-forced metrics, greedy BLEU on the first
    ``valid_bleu_sentences`` validation sentences (rank 0, broadcast), the best score
    (``train.best_metric``), a log point, checkpoints, and early stopping (``train.patience``)."""

    def __init__(self, state: TrainState, evaluator: Engine, loader, model: torch.nn.Module, tokenizer,
                 sources: list[list[int]], references: list[str], settings: DecodeConfig,
                 train_cfg: TrainConfig, checkpointer: Checkpointer, metrics_log: MetricsLog | None,
                 device: torch.device, trainer: Engine):
        self.state, self.evaluator, self.loader = state, evaluator, loader
        self.model, self.tokenizer, self.sources, self.references = model, tokenizer, sources, references
        self.settings, self.cfg, self.checkpointer = settings, train_cfg, checkpointer
        self.metrics_log, self.device = metrics_log, device
        self.stopper = EarlyStopping(patience=train_cfg.patience, score_function=lambda e: e.state.score,
                                     trainer=trainer) if train_cfg.patience > 0 else None

    def attach(self, trainer: Engine) -> None:
        every = self.cfg.eval_every
        event = Events.ITERATION_COMPLETED(every=every * self.state.accumulate) if every > 0 else Events.EPOCH_COMPLETED
        trainer.add_event_handler(event, self)
        trainer.add_event_handler(Events.COMPLETED, self.finish)

    def score(self, metrics: dict) -> float:
        """Higher is better, for checkpoint selection and early stopping."""
        value = metrics[self.cfg.best_metric]
        return -value if self.cfg.best_metric == "loss" else value

    def bleu(self) -> tuple[float, str]:
        """(greedy BLEU on the validation subset, signature), computed on rank 0 and broadcast."""
        bleu, signature = torch.tensor(0.0), ""
        if idist.get_rank() == 0:
            # the validation that picks the best checkpoint decodes as usual, never to the oracle length
            settings = dataclasses.replace(self.settings, oracle_length=False)
            hyps = best_texts(translate(self.model, self.sources, self.tokenizer, settings, self.device))
            score = corpus_bleu(hyps, self.references)
            bleu, signature = torch.tensor(score.value), score.signature
        return (float(idist.broadcast(bleu, src=0)) if idist.get_world_size() > 1 else float(bleu)), signature

    def __call__(self, trainer: Engine) -> None:
        self.state.guard.check()
        step = self.state.updates(trainer)
        self.state.validated_step = step
        self.evaluator.run(self.loader)
        metrics = dict(self.evaluator.state.metrics["valid"])
        metrics["bleu"], signature = self.bleu()
        self.evaluator.state.score = self.score(metrics)
        improved = self.state.best is None or self.evaluator.state.score > self.state.best
        if improved:
            self.state.best = self.evaluator.state.score
        if self.metrics_log is not None:
            self.metrics_log.write("valid", step, epoch=trainer.state.epoch, bleu_signature=signature,
                                   best=improved, **metrics)
            log.info("step %d validation: loss %.3f ppl %.2f acc %.3f BLEU %.2f%s", step, metrics["loss"],
                     metrics["ppl"], metrics["accuracy"], metrics["bleu"], " (best)" if improved else "")
        # best.pt before last.pt: a kill between the two leaves last.pt at the previous
        # checkpoint, whose resume repeats this validation and writes both again; the other
        # order would leave a last.pt whose best score no best.pt holds.
        if improved:
            self.checkpointer.save_best(step, metrics)
        self.checkpointer.save(step, "validation")
        if self.stopper:
            self.stopper(self.evaluator)

    def finish(self, trainer: Engine) -> None:
        """At the end: a budget that is not a multiple of eval_every ends between validations, so
        the final weights are validated too (best.pt can be the last update), unless a signal
        stopped training; then a last checkpoint if the last update has none."""
        step = self.state.updates(trainer)
        if not self.state.stop_signal and self.state.validated_step != step:
            self(trainer)
        if self.state.saved_step != step:
            self.checkpointer.save(step, "signal" if self.state.stop_signal else "end")

