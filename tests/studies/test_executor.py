"""The pieces of a study on a scheduler that need no scheduler: the executor section, the job
ledger, and reading sacct's answer."""
from __future__ import annotations

import json

import pytest

from studies.catalog import load_study
from studies.cluster import parse_states
from studies.executor import ExecutorSettings, parse_executor, with_overrides
from studies.ledger import Job, Ledger, category
from tests.conftest import ROOT
from utils.errors import ConfigError, UserError


def declaration(tmp_path, executor: str) -> object:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"base: {ROOT}/configs/synthetic/base.yaml\nschemes: [rope]\nseeds: [1]\nout: runs/x\n{executor}",
                    encoding="utf-8")
    return path


def test_the_executor_section_is_read_and_checked(tmp_path):
    study = load_study(declaration(tmp_path, "executor: {name: slurm, partition: gpu, mem_gb: 64, runs_per_job: 4}\n"))
    assert study.executor == ExecutorSettings(name="slurm", partition="gpu", mem_gb=64, runs_per_job=4)
    assert load_study(declaration(tmp_path, "")).executor == ExecutorSettings()  # the default: local
    for bad, named in [("{name: pbs}", "'name' must be one of inline, local, submitit-local, slurm"),
                       ("{runs_per_job: 0}", "'runs_per_job' must be at least 1"),
                       ("{mem_gb: 1.5}", "'mem_gb' must be a number"),
                       ("{cpu: 4}", "unknown executor key 'cpu'"),
                       ("{partition: 3}", "'partition' must be a name or null"),
                       ("[slurm]", "'executor' is a mapping")]:
        with pytest.raises(ConfigError, match="cluster.yaml") as err:
            load_study(declaration(tmp_path, f"executor: {bad}\n"))
        assert named in str(err.value) and "\n" not in str(err.value)


def test_the_command_line_overrides_the_section():
    declared = parse_executor({"name": "slurm", "mem_gb": 16}, "s.yaml")
    changed = with_overrides(declared, "submitit-local", ["mem_gb=64", "account=lab", "poll_s=2.5"])
    assert changed == ExecutorSettings(name="submitit-local", mem_gb=64, account="lab", poll_s=2.5)
    assert with_overrides(declared, None, []) == declared
    with pytest.raises(ConfigError, match="expected key=value"):
        with_overrides(declared, None, ["mem_gb"])
    with pytest.raises(ConfigError, match="--executor-option: executor 'timeout_min' must be at least 1"):
        with_overrides(declared, None, ["timeout_min=0"])


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

    from studies import cluster

    asked = []

    def fake_run(command, **kwargs):
        asked.append(command)
        if command[0] == "squeue":
            if "20" in command[command.index("-j") + 1].split(","):
                return subprocess.CompletedProcess(command, 0, "20|PENDING|\n", "")
            return subprocess.CompletedProcess(command, 1, "", "slurm_load_jobs error: Invalid job id specified\n")
        return subprocess.CompletedProcess(command, 0, "20|FAILED|vm\n21|COMPLETED|vm\n", "")

    monkeypatch.setattr(cluster.subprocess, "run", fake_run)
    assert cluster._slurm_states(["20", "21"]) == {"20": ("PENDING", None), "21": ("COMPLETED", "vm")}
    assert asked[-1][-1] == "21"  # sacct asked only for what squeue did not hold
    assert cluster._slurm_states(["21"]) == {"21": ("COMPLETED", "vm")}  # squeue knows none of them: sacct's
    monkeypatch.setattr(cluster.subprocess, "run", lambda command, **kw: subprocess.CompletedProcess(
        command, 1, "", "squeue: error: Unable to contact slurm controller\n"))
    with pytest.raises(UserError, match="squeue failed: squeue: error: Unable to contact"):
        cluster._slurm_states(["20"])
