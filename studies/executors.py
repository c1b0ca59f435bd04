"""Where a study's runs train: one ``Executor`` class per way, registered by name (``REGISTRY``;
a study names one in its ``executor:`` section, ``studies/executor_settings.py``).

An executor is a context manager over the resources it holds while the study lasts (the local
worker pool), with one call, ``run()``: every run of the study's queue trained and tested (kept
when finished earlier), the run folders returned in the declared order, or a one-line
``UserError`` when some run did not finish. ``pool`` is where the study's tail draws its pictures
(the local workers stay for them; elsewhere they are drawn in the study's process).
``studies.driver.run_study`` is the one lifecycle over any of them: check, run, tail, finish.

- ``inline``: one run after another in the study's process;
- ``local``: ``parallel`` spawned worker processes sharing this machine's threads, each run's
  output in ``<out>/logs/<run>.log`` (with ``parallel`` 1, as ``inline``);
- ``submitit-local`` and ``slurm``: jobs of ``runs_per_job`` runs submitted through submitit and
  watched (``studies.cluster``).
"""
from __future__ import annotations

import os
import signal
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, wait
from pathlib import Path
from typing import ClassVar

import torch

from studies.catalog import Study
from studies.progress import RunProgress, StudyProgress
from studies.runs import (
    RunOutcome,
    declared_order,
    fill_data_caches,
    queue,
    run_dir_of,
    run_log,
    tally,
    train_and_test,
    train_and_test_logged,
)
from studies.workers import InlinePool, RunNotStarted, WorkerPool
from utils.device import SHARING_ENV
from utils.errors import UserError
from utils.job_schedulers import SCHEDULERS, Scheduler


def default_parallel(device: str) -> int:
    """Runs at once by default: two 1-thread processes on a CPU with at least two cores (measured
    1.0-1.3x the updates/s of one 2-thread process: ``python -m nmt bench threads``), else one."""
    return 2 if device == "cpu" and (os.cpu_count() or 1) >= 2 else 1


def worker_threads(parallel: int) -> int:
    """Threads of each of ``parallel`` workers: this process's threads shared out (at least one)."""
    return max(1, torch.get_num_threads() // parallel)


def free_threads(allowed: int, load: float, threads: int) -> int:
    """Threads for runs trained in the study's own process: of the ``threads`` PyTorch would use, at
    most the ``allowed`` CPUs less those other processes keep busy (``load``, the 1-minute load
    average before the runs start), at least one. On a loaded machine OpenMP's threads spin against
    the other processes': decoding a synthetic run with 2 threads while two trainings kept both
    cores busy gave 29-31 sentences/s against 105-124 with 1 thread (2026-11-27)."""
    return max(1, min(threads, allowed - int(load)))


def stopped_by(received: signal.Signals, what: str) -> UserError:
    """The one-line error of a study stopped by ``received``: ``what`` says what is done and what to do;
    its exit code is the shell's for a process ended by that signal (128 + its number)."""
    stop = UserError(f"stopped by {received.name}: {what}")
    stop.exit_code = 128 + received
    return stop


class Executor:
    """Where a study's runs train (module doc). Subclasses set ``name`` and implement ``run``."""

    name: ClassVar[str]

    def __init__(self, study: Study, device: str = "cpu", parallel: int | None = None):
        self.study, self.device, self.parallel = study, device, parallel
        self.pool: WorkerPool | InlinePool = InlinePool()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        return None

    @staticmethod
    def _say_sharing(runs: int) -> None:
        """Tell the runs (and workers spawned from now on) how many train at once on this machine:
        their manifests record it (``utils.device.sharing_record``)."""
        os.environ[SHARING_ENV] = str(runs)

    def run(self) -> list[Path]:
        raise NotImplementedError


class InlineExecutor(Executor):
    """One run after another in this process; the first failure stops the study."""

    name = "inline"

    def _inline_threads(self, threads: int) -> int:
        """Threads of the runs trained in this process: what other processes leave free."""
        return free_threads(len(os.sched_getaffinity(0)), os.getloadavg()[0], threads)

    def run(self) -> list[Path]:
        study, runs = self.study, queue(self.study)
        outcomes: list[RunOutcome] = []
        failed = 0
        threads = torch.get_num_threads()
        self._say_sharing(1)  # one after another
        if self.device == "cpu":
            torch.set_num_threads(self._inline_threads(threads))
            print(f"[{study.name}] {len(runs)} runs, one after another with {torch.get_num_threads()} thread(s)",
                  flush=True)
        progress = study_progress(study, runs, 1) if len(runs) > 1 else None
        try:
            for label, seed in runs:
                outcomes.append(train_and_test(study, label, seed, self.device))
                if progress is not None:
                    progress.finished(outcomes[-1].run_dir)
        except BaseException:
            failed = 1  # the run that raised stops the study
            raise
        finally:
            torch.set_num_threads(threads)
            if progress is not None:
                progress.close()
            print(tally(study, len(runs), outcomes, failed), flush=True)
        return declared_order(study, [o.run_dir for o in outcomes])


FAILED = object()  # a run that raised (LocalExecutor._outcome)
PROGRESS_POLL_S = 5.0  # how often the runs' logs are read for the progress line


def study_progress(study: Study, runs: list[tuple[str, int]], parallel: int) -> StudyProgress:
    """The progress of ``runs`` (label, seed), each with its update budget from its config."""
    return StudyProgress(study.name, [RunProgress(run_dir_of(study, label, seed), study.config(label, seed).train.max_steps)
                                      for label, seed in runs], parallel)


class LocalExecutor(InlineExecutor):
    """``parallel`` runs at a time in spawned worker processes (default ``default_parallel``), each
    with its share of this process's threads and its output in ``<out>/logs/<run>.log``; a failed
    run is named with its log while the others go on. The workers stay for the tail's pictures."""

    name = "local"

    def __init__(self, study: Study, device: str = "cpu", parallel: int | None = None):
        parallel = default_parallel(device) if parallel is None else parallel
        if parallel < 1:
            raise UserError(f"--parallel must be at least 1, got {parallel}")
        super().__init__(study, device, parallel)
        self._workers = WorkerPool(parallel, worker_threads(parallel)) if parallel > 1 else None

    def _inline_threads(self, threads: int) -> int:
        """A last run left alone trains with a worker's threads, not the machine's: a table refuses
        runs of other thread counts (``scoring.arithmetic``), so a resumed study must not make one."""
        return worker_threads(self.parallel)

    def __enter__(self) -> LocalExecutor:
        self._say_sharing(self.parallel)
        if self._workers is not None:
            self.pool = self._workers.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._workers is not None:
            self._workers.__exit__(*exc)

    def _outcome(self, future: Future, label: str, seed: int, failures: list[str]) -> RunOutcome | object | None:
        """A finished future's run: its outcome (said on stdout), ``FAILED`` (its failure appended to
        ``failures`` and said), or None when it never started (cancelled, or stopped before it began)."""
        study = self.study
        try:
            outcome = future.result()
        except (CancelledError, RunNotStarted):
            return None
        except Exception as err:  # noqa: BLE001 (one run's failure; the others go on)
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            failures.append(f"{run_dir_of(study, label, seed)} failed ({reason}; see {run_log(study, label, seed)})")
            print(f"[{study.name}] {failures[-1]}", flush=True)
            return FAILED
        print(f"[{study.name}] {outcome.run_dir}: {'trained and tested' if outcome.trained else 'finished earlier, kept'}",
              flush=True)
        return outcome

    def run(self) -> list[Path]:
        study, runs = self.study, queue(self.study)
        if self._workers is None or len(runs) == 1:
            return super().run()
        fill_data_caches(study, runs)
        print(f"[{study.name}] {len(runs)} runs, {self.parallel} at a time with {self._workers.threads} thread(s) "
              f"each; logs in {study.out / 'logs'}", flush=True)
        pool = self.pool
        futures = pool.submit_all(train_and_test_logged, [(study, label, seed, self.device) for label, seed in runs])
        progress = study_progress(study, runs, self.parallel)
        outcomes, failures, not_started = [], [], 0
        pending = dict(zip(futures, runs))
        try:
            while pending:
                finished, _ = wait(pending, timeout=PROGRESS_POLL_S, return_when=FIRST_COMPLETED)
                if pool.received:  # runs still queued in this process are not started either
                    for future in pending:
                        future.cancel()
                for future in (f for f in futures if f in finished):  # in the declared order
                    label, seed = pending.pop(future)
                    outcome = self._outcome(future, label, seed, failures)
                    if outcome is None:
                        not_started += 1
                    elif outcome is not FAILED:
                        outcomes.append(outcome)
                    progress.finished(run_dir_of(study, label, seed))
                if not finished:
                    progress.update()
        finally:
            progress.close()
        # Read before the count is announced: a signal that comes after the count (the tail has begun)
        # is the tail's to report, as `run_study` does; read after it, a signal racing the print was
        # reported as one that stopped runs.
        received = pool.received
        print(tally(study, len(runs), outcomes, len(failures)), flush=True)
        run_dirs = declared_order(study, [o.run_dir for o in outcomes])
        if received:
            raise stopped_by(received, f"{len(run_dirs)} of {len(runs)} runs finished, {len(failures)} stopped or "
                             f"failed (see their logs; a stopped run saved its last.pt), {not_started} not started; "
                             "start the study again to continue")
        if failures:
            raise UserError(f"{len(failures)} of {len(runs)} runs failed: " + "; ".join(failures))
        return run_dirs


class SubmititExecutor(Executor):
    """Jobs of a scheduler through submitit (``studies.cluster``; the scheduler an object of
    ``utils.job_schedulers``): submit what is neither finished nor queued, watch, report failed and
    cancelled jobs; the tail is drawn in this process. One subclass per scheduler (``submitit_executor``)."""

    def __init__(self, study: Study, device: str = "cpu", parallel: int | None = None):
        super().__init__(study.absolute(), device, parallel)

    def run(self) -> list[Path]:
        from studies.cluster import run_jobs  # submitit is imported only for a scheduler

        return run_jobs(self.study, self.device)


def submitit_executor(scheduler: Scheduler) -> type[SubmititExecutor]:
    """The executor class of ``scheduler``, named as it is."""
    return type(f"SubmititExecutor[{scheduler.name}]", (SubmititExecutor,), {"name": scheduler.name})


REGISTRY: dict[str, type[Executor]] = {cls.name: cls for cls in (
    InlineExecutor, LocalExecutor, *(submitit_executor(scheduler) for scheduler in SCHEDULERS.values()))}


def executor_for(study: Study, device: str = "cpu", parallel: int | None = None) -> Executor:
    """The registered executor the study names (``study.executor.name``)."""
    return REGISTRY[study.executor.name](study, device, parallel)
