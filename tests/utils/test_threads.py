"""``--threads auto``: the choice as a function of the cores, the CPU quota, the other processes and
the user's settings (cases written here); the registry of live processes (a dead process's entry,
a reused PID, a kill -9); an explicit setting never overridden; a training re-divided as others
come and go; the choice in the manifest."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT
from utils import threads as th
from utils.errors import UserError
from utils.threads import AUTO, Cores, Registry, choose_threads, cpu_quota, parse_threads


@pytest.fixture(autouse=True)
def no_user_settings(monkeypatch):
    """The tests run as if the user had set no OpenMP variable (a run of the suite under OMP_NUM_THREADS
    would otherwise make every auto an explicit count)."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)


@pytest.fixture
def registry(tmp_path) -> Registry:
    return Registry(tmp_path / "processes")


@pytest.fixture
def sleeper():
    """A live process other than this one (killed after the test)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def restore_threads():
    """This process's torch threads and claim as they were before the test."""
    before = torch.get_num_threads()
    yield
    th.release_threads(before)


# --- the choice, as a function -------------------------------------------------------------------

@pytest.mark.parametrize("cores, others, cap, expected", [
    (Cores(2), 0, None, 2),          # alone: every usable core (torch's own default on this machine)
    (Cores(2), 1, None, 1),          # two processes on two cores: one each
    (Cores(8), 1, None, 4),
    (Cores(8), 2, None, 2),          # 8 // 3
    (Cores(2), 5, None, 1),          # more processes than cores: never fewer than one
    (Cores(8, quota=2.5), 0, None, 3),   # a CPU quota of 2.5 CPUs caps 8 cores of affinity at 3
    (Cores(2, quota=16.0), 0, None, 2),  # a quota above the affinity changes nothing
    (Cores(4, quota=0.5), 0, None, 1),
    (Cores(8), 0, 1, 1),             # decoding: at most one whatever the machine
    (Cores(8), 3, 4, 2),             # the cap does not raise a share
])
def test_auto_divides_the_usable_cores_among_the_processes(cores, others, cap, expected):
    choice = choose_threads(AUTO, cores, others, {}, cap)
    assert choice.threads == expected and choice.auto
    assert choice.passive_wait == (others > 0)  # OpenMP waits passively only where the machine is shared


def test_an_explicit_count_always_wins():
    for others in (0, 3):
        choice = choose_threads(3, Cores(2), others, {"OMP_NUM_THREADS": "1"})
        assert (choice.threads, choice.passive_wait, choice.auto) == (3, False, False)
        assert "set explicitly" in choice.reason


def test_omp_num_threads_wins_over_auto():
    choice = choose_threads(AUTO, Cores(8), 3, {"OMP_NUM_THREADS": "5"})
    assert (choice.threads, choice.passive_wait, choice.auto) == (5, False, False)
    assert "OMP_NUM_THREADS=5" in choice.reason


def test_a_wait_policy_the_user_set_is_kept():
    choice = choose_threads(AUTO, Cores(2), 1, {"OMP_WAIT_POLICY": "ACTIVE"})
    assert choice.threads == 1 and not choice.passive_wait
    assert "OMP_WAIT_POLICY=ACTIVE kept" in choice.reason


def test_the_reason_names_the_cores_and_the_processes():
    reason = choose_threads(AUTO, Cores(8, quota=2.0), 1, {}).reason
    assert reason.startswith("auto, 1 thread(s)")
    assert "2 usable core(s) (affinity 8, a CPU quota of 2)" in reason
    assert "2 of the suite's processes" in reason and "passive" in reason


@pytest.mark.parametrize("text, expected", [("auto", AUTO), ("1", 1), ("12", 12), (4, 4)])
def test_threads_option(text, expected):
    assert parse_threads(text) == expected


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5", ""])
def test_a_bad_threads_option_is_one_line(text):
    with pytest.raises(UserError, match="--threads must be at least 1, or auto"):
        parse_threads(text)


# --- the cores: affinity and the cgroup's quota ---------------------------------------------------

def test_cpu_quota_of_cgroup_v2_takes_the_smallest_up_the_tree(tmp_path):
    root = tmp_path / "cgroup"
    (root / "user" / "job").mkdir(parents=True)
    (root / "user" / "job" / "cpu.max").write_text("max 100000\n")      # no quota of its own
    (root / "user" / "cpu.max").write_text("150000 100000\n")           # 1.5 CPUs above it
    (root / "cpu.max").write_text("400000 100000\n")
    proc = tmp_path / "cgroup.txt"
    proc.write_text("0::/user/job\n")
    assert cpu_quota(root, proc) == pytest.approx(1.5)
    (root / "user" / "cpu.max").write_text("max 100000\n")
    assert cpu_quota(root, proc) == pytest.approx(4.0)
    (root / "cpu.max").unlink()
    assert cpu_quota(root, proc) is None


def test_cpu_quota_of_cgroup_v1(tmp_path):
    root = tmp_path / "cgroup"
    folder = root / "cpu,cpuacct" / "docker" / "abc"
    folder.mkdir(parents=True)
    (folder / "cpu.cfs_quota_us").write_text("250000\n")
    (folder / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "cgroup.txt"
    proc.write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")
    assert cpu_quota(root, proc) == pytest.approx(2.5)
    (folder / "cpu.cfs_quota_us").write_text("-1\n")  # v1's "no quota"
    assert cpu_quota(root, proc) is None


def test_no_cgroup_file_means_no_quota(tmp_path):
    assert cpu_quota(tmp_path, tmp_path / "missing") is None


def test_this_process_cores_follow_its_affinity():
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    cores = th.this_process_cores()
    assert cores.affinity == len(os.sched_getaffinity(0))
    assert 1 <= cores.usable <= cores.affinity


# --- the registry ------------------------------------------------------------------------------

def test_registry_counts_live_processes_other_than_this_one(registry, sleeper):
    assert registry.others() == 0
    assert registry.register(1, "test")                 # this process: never counted by itself
    assert registry.others() == 0
    registry.register(1, "sleeper", pid=sleeper.pid)
    assert registry.others() == 1
    assert registry.others(pid=sleeper.pid) == 1        # from the sleeper's side: this process
    registry.unregister()
    assert registry.others() == 1 and not (registry.folder / f"{os.getpid()}.json").exists()


def test_a_dead_process_entry_is_ignored_and_removed(registry):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    registry.register(2, "gone", pid=dead.pid)
    entry = registry.folder / f"{dead.pid}.json"
    assert entry.exists()
    assert registry.others() == 0
    assert not entry.exists()


def test_a_reused_pid_is_not_the_registered_process(registry, sleeper):
    registry.register(1, "sleeper", pid=sleeper.pid)
    entry = registry.folder / f"{sleeper.pid}.json"
    record = json.loads(entry.read_text())
    if record["start"] is None:
        pytest.skip("no /proc start times on this platform")
    record["start"] = str(int(record["start"]) - 1)  # an earlier process that had this PID
    entry.write_text(json.dumps(record))
    assert registry.others() == 0 and not entry.exists()


def test_an_entry_being_written_is_neither_counted_nor_removed(registry):
    registry.folder.mkdir(parents=True)
    half = registry.folder / "123.json"
    half.write_text('{"pid": 12')
    assert registry.others() == 0 and half.exists()


def test_an_unwritable_registry_is_not_an_error(tmp_path, restore_threads):
    blocker = tmp_path / "file"
    blocker.write_text("")
    choice = th.claim_threads(AUTO, "test", registry=Registry(blocker / "processes"))  # a file where a folder goes
    assert choice.threads >= 1 and "not writable" in choice.reason


CLAIM_AND_WAIT = """
import os, sys, time
from utils.threads import claim_threads, Registry
choice = claim_threads(sys.argv[1], "child", registry=Registry(sys.argv[2]))
import torch
print(choice.threads, torch.get_num_threads(), os.environ.get("OMP_WAIT_POLICY"), flush=True)
if sys.argv[3] == "wait":
    time.sleep(60)
"""


def child(args: list[str], env: dict | None = None, wait: bool = False) -> subprocess.Popen:
    environment = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    return subprocess.Popen([sys.executable, "-c", CLAIM_AND_WAIT, *args, "wait" if wait else "exit"], cwd=ROOT,
                            env={**environment, **(env or {})}, stdout=subprocess.PIPE, text=True)


def test_the_registry_survives_a_kill_9(registry):
    proc = child([AUTO, str(registry.folder)], wait=True)
    proc.stdout.readline()  # claimed
    assert registry.others() == 1
    os.kill(proc.pid, signal.SIGKILL)  # no exit hook runs
    proc.wait()
    assert (registry.folder / f"{proc.pid}.json").exists()
    assert registry.others() == 0
    assert not (registry.folder / f"{proc.pid}.json").exists()


def test_a_process_that_exits_removes_its_entry(registry):
    proc = child([AUTO, str(registry.folder)])
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert not list(registry.folder.glob("*.json"))


# --- applied to a process --------------------------------------------------------------------------

def test_a_shared_machine_makes_waiting_passive_before_torch_loads(registry, sleeper):
    registry.register(1, "sleeper", pid=sleeper.pid)
    out, _ = child([AUTO, str(registry.folder)]).communicate(timeout=120)
    chosen, torch_threads, policy = out.split()
    cores = th.this_process_cores().usable
    assert int(chosen) == int(torch_threads) == max(1, cores // 2)
    assert policy == "PASSIVE"


def test_alone_the_wait_policy_is_left_alone(registry):
    out, _ = child([AUTO, str(registry.folder)]).communicate(timeout=120)
    chosen, torch_threads, policy = out.split()
    assert int(chosen) == int(torch_threads) == th.this_process_cores().usable
    assert policy == "None"


@pytest.mark.parametrize("args, env, expected", [
    (["3"], {}, "3"),                         # --threads 3 beside another process: still 3
    ([AUTO], {"OMP_NUM_THREADS": "3"}, "3"),  # OMP_NUM_THREADS beside another process: still 3
])
def test_explicit_settings_are_never_overridden(registry, sleeper, args, env, expected):
    registry.register(1, "sleeper", pid=sleeper.pid)
    out, _ = child([args[0], str(registry.folder)], env).communicate(timeout=120)
    assert out.split()[1] == expected and out.split()[2] == "None"


def test_an_explicit_claim_is_not_rebalanced(registry, sleeper, restore_threads):
    th.claim_threads(3, "test", registry=registry)
    registry.register(1, "sleeper", pid=sleeper.pid)
    assert th.rebalance() is None
    assert torch.get_num_threads() == 3


def test_auto_is_rebalanced_as_processes_come_and_go(registry, restore_threads, monkeypatch):
    monkeypatch.setattr(th, "this_process_cores", lambda: Cores(4))
    choice = th.claim_threads(AUTO, "test", registry=registry)
    assert choice.threads == 4 and torch.get_num_threads() == 4
    others = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    try:
        for proc in others:
            registry.register(1, "other", pid=proc.pid)
        assert th.rebalance() == 1 and torch.get_num_threads() == 1   # 4 // 3
        others[0].kill()
        others[0].wait()
        assert th.rebalance() == 2 and torch.get_num_threads() == 2
    finally:
        for proc in others:
            proc.kill()
            proc.wait()
    assert th.rebalance() == 4 and torch.get_num_threads() == 4


def test_a_command_releases_its_claim_and_threads(registry, restore_threads, monkeypatch):
    monkeypatch.setattr(th, "this_process_cores", lambda: Cores(3))
    torch.set_num_threads(1)
    with th.threads_claimed(AUTO, "test", registry=registry) as choice:
        assert choice.threads == 3 and torch.get_num_threads() == 3
        assert (registry.folder / f"{os.getpid()}.json").exists()
    assert torch.get_num_threads() == 1
    assert not (registry.folder / f"{os.getpid()}.json").exists()
    assert th.current_claim() is None and th.rebalance() is None


def test_a_training_records_its_choice(tmp_path, tiny_config):
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    env[th.REGISTRY_ENV] = str(tmp_path / "processes")
    done = subprocess.run([sys.executable, "train.py", "--config", str(tiny_config), "--run-dir", str(run_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    usable = th.this_process_cores().usable
    assert manifest["threads"] == usable
    assert manifest["thread_choice"].startswith(f"auto, {usable} thread(s)")
    assert f"threads: {manifest['thread_choice']}" in done.stderr  # the same line in the log
    assert not list((tmp_path / "processes").glob("*.json"))       # released at the end


def test_a_training_records_each_redivision(registry, restore_threads, monkeypatch, sleeper):
    """The training loop's handler: the update and the new count of each change, for the manifest."""
    from types import SimpleNamespace

    from training.handlers import ThreadRebalance, TrainState

    monkeypatch.setattr(th, "this_process_cores", lambda: Cores(4))
    th.claim_threads(AUTO, "test", registry=registry)
    state = TrainState()
    handler = ThreadRebalance(state, every_s=0.0)
    engine = SimpleNamespace(state=SimpleNamespace(iteration=0))
    registry.register(1, "sleeper", pid=sleeper.pid)  # launched with this one: settled before the first update
    handler.before_training(engine)
    assert state.thread_changes == [] and torch.get_num_threads() == 2
    engine.state.iteration = 7
    handler(engine)
    assert state.thread_changes == [] and torch.get_num_threads() == 2   # nothing changed
    registry.unregister(sleeper.pid)                  # the other ended: this one takes the machine
    engine.state.iteration = 12
    handler(engine)
    assert state.thread_changes == [{"update": 12, "threads": 4}] and torch.get_num_threads() == 4


def test_an_ended_process_not_yet_reaped_is_not_counted(registry):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    registry.register(1, "zombie", pid=ended.pid)
    stat = Path(f"/proc/{ended.pid}/stat")
    for _ in range(200):  # ended, still a zombie: its parent (this test) has not waited for it
        if stat.is_file() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        ended.wait()
        pytest.skip("no /proc states on this platform")
    assert registry.others() == 0
    ended.wait()
