"""The study's record of its scheduler jobs: ``<study out>/jobs.jsonl``.

One JSON line per event, appended: a submission (``job``, ``runs``, ``executor``, ``submitted``,
``log``, ``state: SUBMITTED``) and every state change the study saw afterwards (``job``, ``state``,
``node``, ``at``). A job's latest line is its state. A second ``study`` command reads it to know
which runs already have a queued or running job (the run lock is taken only once training
starts, so it cannot answer for queued jobs); ``LedgerLock`` makes the read-then-submit step one
writer's at a time on this machine.
"""
from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

# SLURM's states (squeue, sacct) of a job that may still run; SUBMITTED: recorded, not yet seen by SLURM.
ACTIVE = {"SUBMITTED", "PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING",
          "COMPLETING", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD"}
COMPLETED = "COMPLETED"
CANCELLED = "CANCELLED"


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def category(state: str) -> str:
    """queued, running, finished, cancelled or failed (TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, ...)."""
    if state in ("SUBMITTED", "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "SUSPENDED",
                 "RESV_DEL_HOLD"):
        return "queued"
    if state in ACTIVE:
        return "running"
    if state == COMPLETED:
        return "finished"
    return "cancelled" if state == CANCELLED else "failed"


@dataclass(frozen=True)
class Job:
    """A submitted job as the ledger knows it."""

    job: str  # the scheduler's id (an array task: <array>_<task>)
    runs: tuple[str, ...]  # the run folders' names it trains, in order
    executor: str
    submitted: str
    log: str  # where its output goes (stderr)
    state: str = "SUBMITTED"
    node: str | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE


class Ledger:
    """``<out>/jobs.jsonl`` (module doc)."""

    def __init__(self, out: Path):
        self.path = Path(out) / "jobs.jsonl"

    def jobs(self) -> dict[str, Job]:
        """Every job recorded, by id, in its latest state (lines that do not parse are skipped:
        a line cut by a crash must not stop the study)."""
        jobs: dict[str, Job] = {}
        if not self.path.is_file():
            return jobs
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
                if "runs" in entry:
                    jobs[entry["job"]] = Job(entry["job"], tuple(entry["runs"]), entry["executor"], entry["submitted"],
                                             entry["log"], entry.get("state", "SUBMITTED"), entry.get("node"))
                elif entry["job"] in jobs:
                    jobs[entry["job"]] = replace(jobs[entry["job"]], state=entry["state"],
                                                 node=entry.get("node") or jobs[entry["job"]].node)
            except (ValueError, KeyError, TypeError):
                continue
        return jobs

    def latest_per_run(self) -> dict[str, Job]:
        """Each run's latest job (the last submitted that names it)."""
        per_run: dict[str, Job] = {}
        for job in self.jobs().values():  # in submission order: later ones win
            for run in job.runs:
                per_run[run] = job
        return per_run

    def _append(self, entry: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # one write of one short line on an O_APPEND file: never interleaved with another writer's
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            cut = size > 0 and os.pread(fd, 1, size - 1) != b"\n"  # a line a crash left unfinished
            os.write(fd, (("\n" if cut else "") + json.dumps(entry) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def submitted(self, job: Job) -> None:
        entry = asdict(job)
        entry["runs"] = list(job.runs)
        self._append(entry)

    def changed(self, job: Job, state: str, node: str | None) -> Job:
        self._append({"job": job.job, "state": state, "node": node, "at": now()})
        return replace(job, state=state, node=node or job.node)


class LedgerLock:
    """``with LedgerLock(out):`` one study command at a time reads the ledger and submits (``name``:
    another lock file of the study's output folder, e.g. the tail's)."""

    def __init__(self, out: Path, name: str = ".jobs.lock"):
        self.path = Path(out) / name
        self.fd: int | None = None

    def __enter__(self) -> LedgerLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
