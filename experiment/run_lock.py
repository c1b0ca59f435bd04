"""One writer per run directory: a lock file beside it, ``<parent>/.<name>.lock``.

The lock is an exclusive ``flock`` on that file, so the kernel drops it the moment its holder
ends, even by ``kill -9``: a lock file whose lock nobody holds is a dead writer's, and the next
trainer takes it over with a warning. The file names the holder (PID, host, start time, and its
scheduler job, ``utils.job_schedulers``) for the refusal message; across the nodes of a cluster
``flock`` is not exclusive on every network file system, so a takeover first asks the scheduler
whether the recorded job still runs, and is refused if it does. The file lies beside the run
directory, not in it, so that it can be taken before the directory exists (a new run makes its
directory only once its data and model are built) and survives ``--overwrite`` emptying it.

Every writer of a run takes it: ``train.py`` (new, ``--resume`` and ``--overwrite``) and the
study workers, which call the same ``train``. Readers (``test.py``, ``inference.py``) do not.
"""
from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import sys
from pathlib import Path

from utils.errors import UserError
from utils.job_schedulers import current_job, job_still_runs


def lock_path(run_dir: Path) -> Path:
    run_dir = Path(run_dir).absolute()
    return run_dir.parent / f".{run_dir.name}.lock"


def _holder(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}


def _describe(holder: dict) -> str:
    if not holder:
        return "another process"
    return f"process {holder.get('pid')} on {holder.get('host')} (since {holder.get('since')})"


class RunLock:
    """``with RunLock(run_dir): ...`` holds the run's lock for the block (see the module doc).

    Raises ``UserError`` naming the holder when another live process holds it.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = lock_path(run_dir)
        self.fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot write to run directory {self.run_dir}: {err.strerror or err}") from None
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as err:
                raise UserError(f"cannot take the lock of run directory {self.run_dir} ({self.path}): "
                                f"{err.strerror or err}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise UserError(f"run directory {self.run_dir} is being written by {_describe(_holder(self.path))}; "
                                f"wait for it to end (or stop it) before training this run again") from None
            # The holder we raced may have removed the file between our open and our lock: then we
            # hold a lock on a file nobody else can see; start again on the file that is there now.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _holder(self.path)
        job = previous.get("job")
        if job and job != current_job() and job_still_runs(job):
            # flock is not exclusive on every network file system: a record left by a job the
            # scheduler still runs is a live writer on another node, not a dead one
            os.close(fd)
            raise UserError(f"run directory {self.run_dir} is being written by {job.get('scheduler')} job {job.get('id')} "
                            f"on {job.get('node')}, which still runs; wait for it to end (or cancel it) before "
                            f"training this run again")
        if previous:
            print(f"warning: taking over the lock of {self.run_dir} from {_describe(previous)}, which ended "
                  f"without releasing it", file=sys.stderr)
        record = {"pid": os.getpid(), "host": socket.gethostname(),
                  "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "job": current_job()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still holding it: nobody can take a file we remove
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
