"""The worker processes of a parallel study, and how stop signals reach them.

A parallel study trains its runs in spawned worker processes. Three things must hold whatever
signal arrives, and whenever:

- each training gets a stop signal exactly once (a second one stops it at once, without its
  checkpoint): ``kill`` reaches the study alone and a terminal's Ctrl-C its whole process group,
  so workers leave that group and the study passes the signal on itself. A worker still starting
  holds the signals (inherited mask) until it has left the group, and drops those sent to the
  group meanwhile: the study passes them on, or has set the stop event the worker reads first;
- no run starts once the study is stopping;
- no worker trains on orphaned: a worker whose study died (even by SIGKILL, which cannot be
  passed on) stops its training after the current update, with ``last.pt`` saved, and exits.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from utils.errors import UserError
from utils.threads import claim_threads

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PARENT_POLL_S = 0.5  # how often a worker checks that its study is alive

_stopping = None  # in a worker: the study's "stop" event (set once the study received a stop signal)
_orphaned = threading.Event()  # in a worker: its study has died
_in_run = False  # in a worker: a run is being prepared, trained or tested


class StudyStopped(UserError):
    """A run left before its training began or after it ended: the study was asked to stop."""


class RunNotStarted(UserError):
    """A run its worker did not start: the study had been asked to stop, or had died."""


@contextmanager
def output_to(log: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors too: C++ and child output) to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "a", encoding="utf-8") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def _worker_stop(signum, frame) -> None:
    """A worker's own handler of the signals the study passes on. While training, the training's
    handler replaces it (the run stops after its current update and saves ``last.pt``); outside a
    run the signal is ignored, so that no worker dies (a dead worker breaks the pool, which then
    kills the others mid-update)."""
    if _in_run:
        raise StudyStopped(f"stopped by {signal.Signals(signum).name} outside its training")


def _watch_parent(parent: int) -> None:
    """In a worker: once the study is gone (its parent pid changed), stop the run in progress as
    a passed-on SIGTERM would, wait for it to end, and exit: nobody is left to take its result."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    _orphaned.set()
    if _in_run:
        os.kill(os.getpid(), signal.SIGTERM)
    while _in_run:
        time.sleep(0.1)
    os._exit(128 + signal.SIGTERM)


def _worker_init(threads: int, stopping, study_pid: int) -> None:
    """A worker's start: its own process group, then the signals it was born holding released
    (those sent to the study's group meanwhile dropped, see the module docstring), its handlers,
    the watch on the study (``study_pid``: the study may have died before this ran) and its
    thread share."""
    global _stopping
    _stopping = stopping
    os.setpgid(0, 0)
    dropped = signal.sigpending() & set(STOP_SIGNALS)
    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in dropped}  # SIG_IGN discards a pending signal
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _worker_stop)
    threading.Thread(target=_watch_parent, args=(study_pid,), daemon=True, name="watch-study").start()
    claim_threads(threads, "study worker")  # counted by the suite's other processes (utils.threads)


def _run_guarded(fn: Callable[..., Any], args: tuple) -> Any:
    """``fn(*args)`` in a worker, unless the study is stopping or gone."""
    global _in_run
    if _orphaned.is_set() or (_stopping is not None and _stopping.is_set()):
        raise RunNotStarted("not started: the study was stopping")
    _in_run = True
    try:
        return fn(*args)
    finally:
        _in_run = False


class WorkerPool:
    """``parallel`` spawned worker processes of ``threads`` threads each. While the pool is open,
    SIGINT, SIGTERM and SIGHUP to this process are passed on to the workers (SIGHUP as SIGTERM),
    where each training stops after its current update and saves ``last.pt`` as a lone training
    would, and calls not started yet are not started; ``received`` names the first such signal.
    ``fn`` given to ``submit_all`` must be picklable (a module-level function)."""

    def __init__(self, parallel: int, threads: int) -> None:
        self.parallel, self.threads = parallel, threads
        self.received: signal.Signals | None = None
        # While set (the study's tail: tables computed here), a stop signal also ends this process's
        # own work at once (StudyStopped raised where it runs), not after its last table.
        self.stop_at_once = False
        self._previous: dict = {}

    def __enter__(self) -> WorkerPool:
        context = mp.get_context("spawn")
        self._stopping = context.Event()
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        self._pool = ProcessPoolExecutor(self.parallel, mp_context=context, initializer=_worker_init,
                                         initargs=(self.threads, self._stopping, os.getpid()))
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._pool.shutdown(wait=True, cancel_futures=self.received is not None)
        finally:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)

    def submit_all(self, fn: Callable[..., Any], calls: list[tuple]) -> list[Future]:
        """One future per argument tuple, in order. The workers start here, holding the stop
        signals (a child inherits the signal mask): with a spawn context, ProcessPoolExecutor
        starts its processes in ``submit`` (CPython 3.9+), not when it is created."""
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            return [self._pool.submit(_run_guarded, fn, args) for args in calls]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a signal that came meanwhile is handled now

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """One call of ``fn(*args)`` on a worker (``submit_all`` of one call)."""
        return self.submit_all(fn, [args])[0]

    def _handle(self, signum, frame) -> None:
        self.received = self.received or signal.Signals(signum)
        self._stopping.set()
        for worker in mp.active_children():  # a second signal is passed on too: the workers stop at once
            try:
                os.kill(worker.pid, signal.SIGTERM if signum == signal.SIGHUP else signum)
            except ProcessLookupError:
                pass
        if self.stop_at_once:
            raise StudyStopped(f"stopped by {signal.Signals(signum).name} while writing the study's tables")


class InlinePool:
    """The serial study's stand-in for ``WorkerPool``: ``submit`` runs the call at once, in this
    process, and returns its finished future (the result, or the exception it raised)."""

    received: signal.Signals | None = None
    stop_at_once = False  # a serial study keeps the default handlers: a stop ends it at once anyway

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as err:  # noqa: BLE001 (handed to the caller through the future, as a pool would)
            future.set_exception(err)
        return future
