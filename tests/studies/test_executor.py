"""The pieces of a study on a scheduler that need no scheduler: the executor section, the job
ledger, and reading sacct's answer."""
from __future__ import annotations

import json

import pytest

from studies.catalog import load_study
from studies.executor_settings import ExecutorSettings
from studies.ledger import Job, Ledger, category
from tests.conftest import ROOT
from utils.errors import ConfigError, UserError
from utils.job_schedulers import parse_states


def declaration(tmp_path, executor: str) -> object:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"config: {ROOT}/configs/synthetic/base.yaml\nschemes: [rope]\nseeds: [1]\nout: runs/x\n{executor}",
                    encoding="utf-8")
    return path


def test_the_executor_section_is_read_and_checked(tmp_path):
    study = load_study(declaration(tmp_path, "executor: {name: slurm, partition: gpu, mem_gb: 64, runs_per_job: 4}\n"))
    assert study.executor == ExecutorSettings(name="slurm", partition="gpu", mem_gb=64, runs_per_job=4)
    assert load_study(declaration(tmp_path, "")).executor == ExecutorSettings()  # the default: local
    # the bad values are the typed loader's one-line errors (tests/studies/test_study_catalog.py)
    with pytest.raises(ConfigError, match="cluster.yaml") as err:
        load_study(declaration(tmp_path, "executor: {runs_per_job: 0}\n"))
    assert "'executor.runs_per_job'" in str(err.value) and "\n" not in str(err.value)


def test_the_registry_holds_one_executor_class_per_name():
    from studies.executor_settings import EXECUTORS
    from studies.executors import REGISTRY, Executor

    assert list(REGISTRY) == list(EXECUTORS)
    assert all(issubclass(cls, Executor) and cls.name == name for name, cls in REGISTRY.items())


def test_gpus_follow_the_device_unless_set():
    assert ExecutorSettings().gpus("cuda") == 1 and ExecutorSettings().gpus("cpu") == 0
    assert ExecutorSettings(gpus_per_job=0).gpus("cuda") == 0


def test_the_ledger_keeps_each_jobs_latest_state_and_survives_a_cut_line(tmp_path):
    ledger = Ledger(tmp_path)
    first = Job("7_0", ("rope",), "slurm", "t0", "/logs/7_0.err")
    second = Job("7_1", ("alibi", "alibi-seed2"), "slurm", "t0", "/logs/7_1.err")
    ledger.submitted(first)
    ledger.submitted(second)
    ledger.changed(first, "RUNNING", "node3")
    ledger.changed(first, "COMPLETED", None)  # the node stays known
    with open(ledger.path, "a", encoding="utf-8") as f:
        f.write('{"job": "7_1", "sta')  # a line a crash cut short
    jobs = ledger.jobs()
    assert jobs["7_0"].state == "COMPLETED" and jobs["7_0"].node == "node3" and not jobs["7_0"].active
    assert jobs["7_1"].state == "SUBMITTED" and jobs["7_1"].active
    # a run resubmitted later belongs to its newest job
    ledger.submitted(Job("9", ("rope",), "slurm", "t1", "/logs/9.err"))
    per_run = ledger.latest_per_run()
    assert per_run["rope"].job == "9" and per_run["alibi-seed2"].job == "7_1"
    assert all(json.loads(line)["job"] for line in ledger.path.read_text().splitlines()[:4])


def test_states_fall_into_the_progress_categories():
    assert [category(s) for s in ("SUBMITTED", "PENDING", "REQUEUED", "RUNNING", "COMPLETING", "COMPLETED",
                                  "CANCELLED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")] == [
        "queued", "queued", "queued", "running", "running", "finished", "cancelled", "failed", "failed", "failed",
        "failed"]


def test_sacct_lines_are_read_with_pending_array_tasks_expanded():
    text = "12_0|COMPLETED|vm\n12_1|CANCELLED by 0|vm\n12_[2-3%2]|PENDING|None assigned\n13|RUNNING|n2\n14|||\n"
    states = parse_states(text, ["12_0", "12_1", "12_2", "12_3", "13", "15"])
    assert states == {"12_0": ("COMPLETED", "vm"), "12_1": ("CANCELLED", "vm"), "12_2": ("PENDING", None),
                      "12_3": ("PENDING", None), "13": ("RUNNING", "n2")}  # 15: sacct does not know it yet


def test_squeue_answers_for_the_jobs_it_holds_and_sacct_for_the_rest(monkeypatch):
    """sacct lags the controller: a requeued job's ended attempt can read FAILED there while squeue
    already holds it again; the live view wins, and a job squeue no longer holds is sacct's."""
    import subprocess

    from utils import job_schedulers

    slurm = job_schedulers.SCHEDULERS["slurm"]
    asked = []

    def fake_run(command, **kwargs):
        asked.append(command)
        if command[0] == "squeue":
            if "20" in command[command.index("-j") + 1].split(","):
                return subprocess.CompletedProcess(command, 0, "20|PENDING|\n", "")
            return subprocess.CompletedProcess(command, 1, "", "slurm_load_jobs error: Invalid job id specified\n")
        return subprocess.CompletedProcess(command, 0, "20|FAILED|vm\n21|COMPLETED|vm\n", "")

    monkeypatch.setattr(job_schedulers.subprocess, "run", fake_run)
    assert slurm.states([("20", ""), ("21", "")]) == {"20": ("PENDING", None), "21": ("COMPLETED", "vm")}
    assert asked[-1][-1] == "21"  # sacct asked only for what squeue did not hold
    assert slurm.states([("21", "")]) == {"21": ("COMPLETED", "vm")}  # squeue knows none of them: sacct's
    monkeypatch.setattr(job_schedulers.subprocess, "run", lambda command, **kw: subprocess.CompletedProcess(
        command, 1, "", "squeue: error: Unable to contact slurm controller\n"))
    with pytest.raises(UserError, match="squeue failed: squeue: error: Unable to contact"):
        slurm.states([("20", "")])


def test_pending_reasons_and_jobs_larger_than_every_node(monkeypatch):
    """The watcher names SLURM's reason for pending jobs; jobs asking for more than any node has are
    refused before submission instead of pending forever (PartitionConfig)."""
    import subprocess

    from utils import job_schedulers

    slurm = job_schedulers.SCHEDULERS["slurm"]
    def fake_run(command, **kwargs):
        if command[0] == "squeue":
            return subprocess.CompletedProcess(command, 0, "30_[1-2]|PartitionConfig\n31|Resources\n", "")
        return subprocess.CompletedProcess(command, 0, "2|3900\n4|16000+\n", "")  # sinfo: CPUs|memory (MB)

    monkeypatch.setattr(job_schedulers.subprocess, "run", fake_run)
    assert slurm.pending_reasons(["30_1", "30_2", "31", "32"]) == {
        "30_1": "PartitionConfig", "30_2": "PartitionConfig", "31": "Resources"}
    assert job_schedulers.largest_node(None) == (4, 16000)
    assert job_schedulers.SCHEDULERS["submitit-local"].check_fits(64, 1024, None) is None  # no node sizes to exceed
    with pytest.raises(UserError, match=r"ask for 8 CPUs and 32 GB, more than any node has \(at most 4 CPUs, 15.6 GB\)"):
        slurm.check_fits(8, 32, None)
    with pytest.raises(UserError, match="ask for 4 CPUs and 32 GB"):  # enough CPUs, too much memory
        slurm.check_fits(4, 32, None)
    slurm.check_fits(4, 15, None)  # fits: no error


def test_runs_in_the_studys_own_process_leave_the_busy_cpus_to_others():
    """The inline executor's thread count: the CPUs it may use less the load other processes put on
    them, never more than PyTorch's own count, never fewer than one."""
    from studies.executors import free_threads

    assert free_threads(allowed=8, load=0.4, threads=8) == 8  # an idle machine: every thread
    assert free_threads(allowed=2, load=2.3, threads=2) == 1  # both cores busy elsewhere: one thread
    assert free_threads(allowed=16, load=5.9, threads=16) == 11
    assert free_threads(allowed=16, load=0.0, threads=4) == 4  # never more than asked for


def test_a_local_studys_last_run_trains_with_a_workers_threads_and_says_who_shared(tmp_path, monkeypatch):
    """A parallel study resumed with one run left trains it in its own process: with the threads each
    worker has, not the machine's (a table refuses runs of other thread counts), and its manifest is
    told how many runs trained at once."""
    import os

    import torch

    from studies import executors
    from utils.device import SHARING_ENV

    study = load_study(declaration(tmp_path, ""))
    seen = []
    monkeypatch.setattr(executors, "queue", lambda s: [("rope", 1)])
    monkeypatch.setattr(executors, "train_and_test", lambda s, label, seed, device: seen.append(
        (torch.get_num_threads(), os.environ.get(SHARING_ENV))) or executors.RunOutcome(tmp_path / label, True))
    monkeypatch.setattr(executors, "declared_order", lambda s, dirs: dirs)
    before = torch.get_num_threads()
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # an idle machine: inline would take every thread
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})  # four cores, whatever this machine has
    monkeypatch.delenv(SHARING_ENV, raising=False)
    try:
        torch.set_num_threads(4)
        with executors.LocalExecutor(study, "cpu", parallel=4) as local:
            local.run()
        executors.InlineExecutor(study, "cpu").run()
    finally:
        torch.set_num_threads(before)
    assert seen[0] == (1, "1") and seen[1][1] == "1"  # 4 threads shared by 4 workers; one run at a time
    assert seen[1][0] == 4  # inline: what the idle four-core machine allows
