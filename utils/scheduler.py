"""The batch-scheduler job this process runs in, read from the environment the scheduler sets.

SLURM sets ``SLURM_JOB_ID`` (and, for a task of an array, ``SLURM_ARRAY_JOB_ID`` and
``SLURM_ARRAY_TASK_ID``: ``sacct`` names it ``<array job>_<task>``) and ``SLURMD_NODENAME``;
submitit's local executor sets ``SUBMITIT_LOCAL_JOB_ID`` (the job's process id). A run's manifest
records the job (``job``), so a table's row can be traced to the scheduler's accounting.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess


def current_job() -> dict[str, str] | None:
    """``{"scheduler", "id", "node"}`` of the job this process runs in, or None outside any."""
    env = os.environ
    if "SLURM_JOB_ID" in env:
        array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
        job_id = f"{array}_{task}" if array and task else env["SLURM_JOB_ID"]
        return {"scheduler": "slurm", "id": job_id, "node": env.get("SLURMD_NODENAME") or socket.gethostname()}
    if "SUBMITIT_LOCAL_JOB_ID" in env:
        return {"scheduler": "submitit-local", "id": env["SUBMITIT_LOCAL_JOB_ID"], "node": socket.gethostname()}
    return None


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


def job_still_runs(job: dict) -> bool | None:
    """Whether the scheduler still runs (or holds queued) ``job`` (a ``current_job`` record): True,
    False, or None when this machine cannot ask (no ``squeue``; a submitit-local job: its process)."""
    if job.get("scheduler") == "submitit-local":
        return str(job.get("id", "")).isdigit() and process_alive(int(job["id"]))
    if job.get("scheduler") != "slurm" or shutil.which("squeue") is None:
        return None
    try:
        done = subprocess.run(["squeue", "-h", "-j", str(job["id"]), "-o", "%T"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired, KeyError):
        return None
    if done.returncode != 0:  # squeue refuses a job id it no longer knows
        return False if "Invalid job id" in done.stderr else None
    return bool(done.stdout.strip())
