"""The scheduler objects: a job recognised from the environment its scheduler sets, and asked
whether it still runs, through its own scheduler only."""
from __future__ import annotations

import os
import subprocess
import sys

from utils import job_schedulers
from utils.job_schedulers import SCHEDULERS, current_job, job_still_runs


def test_a_job_is_its_schedulers_by_the_environment(monkeypatch):
    for key in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURMD_NODENAME", "SUBMITIT_LOCAL_JOB_ID"):
        monkeypatch.delenv(key, raising=False)
    assert current_job() is None
    monkeypatch.setenv("SUBMITIT_LOCAL_JOB_ID", "4242")
    assert current_job()["scheduler"] == "submitit-local" and current_job()["id"] == "4242"
    monkeypatch.setenv("SLURM_JOB_ID", "17")
    monkeypatch.setenv("SLURMD_NODENAME", "node3")
    assert current_job() == {"scheduler": "slurm", "id": "17", "node": "node3"}  # the local ones run inside SLURM's
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "12")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert current_job()["id"] == "12_3"  # sacct's name of an array's task


def test_whether_a_job_still_runs_is_asked_of_its_own_scheduler(monkeypatch):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert job_still_runs({"scheduler": "submitit-local", "id": str(os.getpid())}) is True
    assert job_still_runs({"scheduler": "submitit-local", "id": str(ended.pid)}) is False
    assert job_still_runs({"scheduler": "pbs", "id": "1"}) is None  # no scheduler of that name: cannot tell
    assert job_still_runs({"scheduler": "slurm"}) is None  # a record without its id
    asked = []

    def squeue(command, **kwargs):
        asked.append(command)
        return subprocess.CompletedProcess(command, 1, "", "slurm_load_jobs error: Invalid job id specified\n")

    monkeypatch.setattr(job_schedulers.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(job_schedulers.subprocess, "run", squeue)
    assert job_still_runs({"scheduler": "slurm", "id": "99"}) is False and asked[-1][:3] == ["squeue", "-h", "-j"]
    assert [s.name for s in SCHEDULERS.values()] == list(SCHEDULERS)
