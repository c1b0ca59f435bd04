"""The batch schedulers a study's jobs go to through submitit, one object each: how a job of it is
recognised from the environment it runs in, how its states and pending reasons are asked, whether
a job still runs, what it may ask for, and what submitit needs to submit to it. Low enough for the
run lock and the manifest (a run records the job it ran in, a takeover asks whether that job still
runs); ``studies.cluster`` submits and watches through the same objects, so that nothing above
branches on a scheduler's name.

SLURM sets ``SLURM_JOB_ID`` (and, for a task of an array, ``SLURM_ARRAY_JOB_ID`` and
``SLURM_ARRAY_TASK_ID``: ``sacct`` names it ``<array job>_<task>``) and ``SLURMD_NODENAME``;
submitit's local executor sets ``SUBMITIT_LOCAL_JOB_ID`` (the job's process id).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import ClassVar

from utils.errors import UserError

COMPLETED, FAILED, RUNNING = "COMPLETED", "FAILED", "RUNNING"
State = tuple[str, str | None]  # the scheduler's state of a job and its node (None: not known)


class Scheduler:
    """What the suite needs of a batch scheduler; the defaults are a scheduler's that has nothing to
    say (no pending reasons, no node sizes, no signal to hold back)."""

    name: ClassVar[str]  # the executor name a study gives (``study.executor.name``) and a ledger records
    submitit_cluster: ClassVar[str]  # submitit's name of it (``AutoExecutor(cluster=...)``)

    def job_here(self, env: Mapping[str, str]) -> dict[str, str] | None:
        """``{"scheduler", "id", "node"}`` of this scheduler's job that ``env`` is the environment of."""
        raise NotImplementedError

    def still_runs(self, job_id: str) -> bool | None:
        """Whether the job still runs (or waits queued): True, False, or None when this machine cannot ask."""
        raise NotImplementedError

    def states(self, jobs: list[tuple[str, str]]) -> dict[str, State]:
        """(state, node) of each (job id, its log path) the scheduler can tell of."""
        raise NotImplementedError

    def pending_reasons(self, job_ids: list[str]) -> dict[str, str]:
        """Why the scheduler keeps each of ``job_ids`` pending (only those it says a reason for)."""
        return {}

    def check_fits(self, cpus: int, mem_gb: int, partition: str | None) -> None:
        """Refuse in one line jobs that no node could run (they would wait forever)."""

    def submitit_parameters(self, signal_delay_s: int, array_parallelism: int,
                            queue: Mapping[str, str | None]) -> dict[str, object]:
        """submitit's parameters of this scheduler alone (``queue``: partition, account, qos)."""
        return {}

    @contextlib.contextmanager
    def submitting(self) -> Iterator[None]:
        """Around a submission: what the jobs' processes must inherit from the submitter."""
        yield


class Slurm(Scheduler):
    """SLURM through its commands (squeue, sacct, sinfo): one call of each for all of a study's jobs."""

    name, submitit_cluster = "slurm", "slurm"

    def job_here(self, env: Mapping[str, str]) -> dict[str, str] | None:
        if "SLURM_JOB_ID" not in env:
            return None
        array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
        job_id = f"{array}_{task}" if array and task else env["SLURM_JOB_ID"]
        return {"scheduler": self.name, "id": job_id, "node": env.get("SLURMD_NODENAME") or socket.gethostname()}

    def still_runs(self, job_id: str) -> bool | None:
        if shutil.which("squeue") is None:
            return None
        try:
            done = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                                  timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:  # squeue refuses a job id it no longer knows
            return False if "Invalid job id" in done.stderr else None
        return bool(done.stdout.strip())

    def states(self, jobs: list[tuple[str, str]]) -> dict[str, State]:
        """squeue (the controller's live view) answers for the jobs it still holds, sacct (the
        accounting database, which lags it: a requeued job's ended attempt may show there as FAILED
        for a moment after the controller queued it again) for the others."""
        job_ids = [job_id for job_id, _ in jobs]
        if not job_ids:
            return {}
        live = _ask(["squeue", "-h", "-j", _arrays(job_ids), "-o", "%i|%T|%N"])
        if live.returncode != 0 and "Invalid job id" not in live.stderr:  # every id unknown: none is live
            raise UserError(f"squeue failed: {_reason(live)} (is SLURM's controller, slurmctld, running?)")
        states = parse_states(live.stdout if live.returncode == 0 else "", job_ids)
        rest = [j for j in job_ids if j not in states]
        if not rest:
            return states
        done = _ask(["sacct", "-X", "-n", "-P", "-o", "JobID,State,NodeList", "-j", _arrays(rest)])
        if done.returncode != 0:
            raise UserError(f"sacct failed: {_reason(done)} (is SLURM's accounting, slurmdbd, running?)")
        return {**parse_states(done.stdout, rest), **states}

    def pending_reasons(self, job_ids: list[str]) -> dict[str, str]:
        """squeue's reason (``Resources``, ``Priority``, ``PartitionConfig``, ...); one call."""
        if not job_ids:
            return {}
        answer = _ask(["squeue", "-h", "-t", "PENDING", "-j", _arrays(job_ids), "-o", "%i|%r"])
        reasons: dict[str, str] = {}
        for line in answer.stdout.splitlines() if answer.returncode == 0 else []:
            job_id, _, reason = line.partition("|")
            for wanted in job_ids:
                if wanted == job_id or ("_[" in job_id and wanted.split("_")[0] == job_id.split("_")[0]):
                    reasons.setdefault(wanted, reason.strip())
        return reasons

    def check_fits(self, cpus: int, mem_gb: int, partition: str | None) -> None:
        """More CPUs or memory than any node (of ``partition``) has: SLURM would keep the jobs pending
        forever (``PartitionConfig``)."""
        largest = largest_node(partition)
        if largest is None:
            return
        most_cpus, memory = largest
        if cpus > most_cpus or mem_gb * 1024 > memory:
            raise UserError(f"the jobs ask for {cpus} CPUs and {mem_gb} GB, more than any node "
                            f"{'of ' + partition + ' ' if partition else ''}has (at most {most_cpus} CPUs, "
                            f"{memory / 1024:.1f} GB): they would stay pending; set study.executor.cpus_per_task and "
                            f"study.executor.mem_gb (defaults 8 and 32)")

    def submitit_parameters(self, signal_delay_s: int, array_parallelism: int,
                            queue: Mapping[str, str | None]) -> dict[str, object]:
        return {"slurm_signal_delay_s": signal_delay_s, "slurm_array_parallelism": array_parallelism,
                **{f"slurm_{key}": value for key, value in queue.items() if value is not None}}


class SubmititLocal(Scheduler):
    """submitit's local executor: each job a process of this machine, its state its process's and
    then its result file's."""

    name, submitit_cluster = "submitit-local", "local"

    def job_here(self, env: Mapping[str, str]) -> dict[str, str] | None:
        if "SUBMITIT_LOCAL_JOB_ID" not in env:
            return None
        return {"scheduler": self.name, "id": env["SUBMITIT_LOCAL_JOB_ID"], "node": socket.gethostname()}

    def still_runs(self, job_id: str) -> bool | None:
        return job_id.isdigit() and process_alive(int(job_id))

    def states(self, jobs: list[tuple[str, str]]) -> dict[str, State]:
        return {job_id: self._state(job_id, log) for job_id, log in jobs}

    @staticmethod
    def _state(job_id: str, log: str) -> State:
        """Running while its process lives, then what its result file says."""
        if job_id.isdigit() and process_alive(int(job_id)):
            return RUNNING, None
        result = Path(log).parent / f"{job_id}_0_result.pkl"
        if not result.is_file():
            return FAILED, None
        import submitit  # imported only where a job was submitted through it

        outcome = submitit.core.utils.pickle_load(result)[0]
        return (COMPLETED if outcome == "success" else FAILED), None

    @contextlib.contextmanager
    def submitting(self) -> Iterator[None]:
        """SIGINT ignored, which the jobs' processes (children of this one, in the terminal's process
        group) inherit and keep (``StopOnSignal``): a SLURM job is outside the terminal anyway; a
        local one must not stop at the Ctrl-C that stops the watching."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


SCHEDULERS: dict[str, Scheduler] = {s.name: s for s in (SubmititLocal(), Slurm())}


def current_job() -> dict[str, str] | None:
    """``{"scheduler", "id", "node"}`` of the job this process runs in, or None outside any. A
    run's manifest records it, so a table's row can be traced to the scheduler's accounting."""
    # the cluster's first: a local job started inside a SLURM allocation is accounted to the SLURM job
    return next((job for s in reversed(SCHEDULERS.values()) if (job := s.job_here(os.environ)) is not None), None)


def job_still_runs(job: dict) -> bool | None:
    """Whether the scheduler still runs (or holds queued) ``job`` (a ``current_job`` record): True,
    False, or None when this machine cannot ask or the record names no known scheduler."""
    scheduler = SCHEDULERS.get(job.get("scheduler"))
    return None if scheduler is None or "id" not in job else scheduler.still_runs(str(job["id"]))


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs: a child of this process that ended is reaped here (else
    it would stay a zombie, which signal 0 still finds)."""
    try:
        ended, _ = os.waitpid(pid, os.WNOHANG)
        return ended == 0
    except ChildProcessError:  # not our child
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        return True
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as status:
            return "\nState:\tZ" not in status.read()
    except OSError:
        return False


def parse_states(text: str, job_ids: list[str]) -> dict[str, State]:
    """(state, node) of each of ``job_ids`` that ``text``'s ``JobID|State|NodeList`` lines name
    (``sacct -X -n -P -o JobID,State,NodeList`` or ``squeue -h -o %i|%T|%N``): ``CANCELLED by 0``
    is CANCELLED; a pending array's line (``12_[2-5%2]``) gives its state to each of ``job_ids`` in
    that array that has no line of its own."""
    states: dict[str, State] = {}
    pending_arrays: dict[str, State] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 3 or not parts[1]:
            continue
        job_id, state = parts[0], parts[1].split()[0]
        node = parts[2] if parts[2] not in ("", "None assigned", "(null)") else None
        if "_[" in job_id:
            pending_arrays[job_id.split("_")[0]] = (state, node)
        else:
            states[job_id] = (state, node)
    for job_id in job_ids:
        if job_id not in states and job_id.split("_")[0] in pending_arrays and "_" in job_id:
            states[job_id] = pending_arrays[job_id.split("_")[0]]
    return {job_id: states[job_id] for job_id in job_ids if job_id in states}


def largest_node(partition: str | None) -> tuple[int, int] | None:
    """The most CPUs and the most memory (MB) any node of ``partition`` (default: every node) has,
    from sinfo; None when sinfo does not say."""
    answer = _ask(["sinfo", "-h", "-o", "%c|%m", *(["-p", partition] if partition else [])])
    sizes = []
    for line in answer.stdout.splitlines() if answer.returncode == 0 else []:
        cpus, _, memory = line.partition("|")
        if cpus.strip().isdigit() and memory.strip().rstrip("+").isdigit():
            sizes.append((int(cpus), int(memory.strip().rstrip("+"))))
    return (max(c for c, _ in sizes), max(m for _, m in sizes)) if sizes else None


def _arrays(job_ids: list[str]) -> str:
    """The array jobs of ``job_ids`` (``12_3`` -> ``12``), comma-separated, as squeue and sacct take them."""
    return ",".join(sorted({j.split("_")[0] for j in job_ids}))


def _reason(answer: subprocess.CompletedProcess) -> str:
    return answer.stderr.strip().splitlines()[0] if answer.stderr.strip() else f"exit {answer.returncode}"


def _ask(command: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise UserError(f"{command[0]} failed: {err} (is SLURM installed and its controller reachable?)") from None
