"""What a run promises: one writer per run directory, a finished run is final, and a kill -9 at
any instant leaves a directory that resumes to the uninterrupted run's weights."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from experiment.checkpoint import load_checkpoint
from experiment.run_lock import lock_path
from nmt import train
from tests.conftest import ROOT
from training.handlers import StopOnSignal


@pytest.fixture(scope="module")
def whole(tiny_config, tmp_path_factory) -> Path:
    """An uninterrupted 8-update run (validations at 4 and 8): what every interrupted one must equal.
    Trained in a subprocess, as the interrupted runs are: exact resume holds for the same thread
    count, which --threads auto gives each of them alike (the test session's own process registry,
    tests/conftest.py, holds none of them while another trains)."""
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    done = subprocess.run([sys.executable, "train.py", "--config", str(tiny_config), "--run-dir", str(run_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return run_dir


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["model"]


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and max((wa[k] - wb[k]).abs().max().item() for k in wa) <= 1e-6


def points(run_dir: Path, kind: str) -> list[int]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [r["step"] for r in map(json.loads, lines) if r["kind"] == kind]


def files_and_times(run_dir: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(run_dir)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_resuming_a_finished_run_changes_nothing(tiny_config, tmp_path, capsys):
    run_dir = tmp_path / "run"
    train.main(["--config", str(tiny_config), "--run-dir", str(run_dir)])
    before = files_and_times(run_dir)
    capsys.readouterr()
    train.main(["--resume", str(run_dir)])
    err = capsys.readouterr().err
    assert f"{run_dir} finished at step 8 (max_steps); nothing to do" in err
    assert files_and_times(run_dir) == before  # not one byte or time stamp changed


def test_extending_a_finished_run_is_explicit_and_recorded(tiny_config, tmp_path):
    run_dir = tmp_path / "run"
    train.main(["--config", str(tiny_config), "--run-dir", str(run_dir), "train.max_steps=6"])
    train.main(["--resume", str(run_dir), "train.max_steps=8"])
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["steps"] == 8 and manifest["last_finished"] and manifest["ended_by"] == "max_steps"
    assert [(e["from_steps"], e["max_steps"]) for e in manifest["extensions"]] == [(6, 8)]
    assert points(run_dir, "train") == list(range(1, 9))  # no update repeated or skipped


def test_a_signal_after_the_last_update_resumes_without_training_further(tiny_config, tmp_path, monkeypatch):
    """Ctrl-C during the last update: the run stops at its budget before the final validation; a
    restart validates and saves what is missing and trains no update past ``max_steps``."""
    run_dir = tmp_path / "run"
    caught = StopOnSignal.__call__

    def signal_at_the_budget(self, engine):
        if self.state.updates(engine) == 6:
            self.state.stop_signal = "SIGINT"
        caught(self, engine)

    with monkeypatch.context() as patch:
        patch.setattr(StopOnSignal, "__call__", signal_at_the_budget)
        train.main(["--config", str(tiny_config), "--run-dir", str(run_dir), "train.max_steps=6"])
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["stopped_by"] == "SIGINT" and points(run_dir, "valid") == [4]
    train.main(["--resume", str(run_dir)])
    reference = tmp_path / "reference"
    train.main(["--config", str(tiny_config), "--run-dir", str(reference), "train.max_steps=6"])
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == 6
    assert points(run_dir, "train") == points(reference, "train") == list(range(1, 7))
    assert points(run_dir, "valid") == points(reference, "valid") == [4, 6]
    assert same_weights(run_dir / "checkpoints" / "best.pt", reference / "checkpoints" / "best.pt")


def test_a_sigint_ignored_at_start_stays_ignored_and_the_other_stop_signals_still_stop():
    """A detached job (``nohup``, a study's submitit-local job) starts with SIGINT ignored: the
    terminal's Ctrl-C must not stop its training; SIGTERM and SIGUSR2 (requeue, time limit) must."""
    from types import SimpleNamespace

    def stopped_by(*signals: signal.Signals, sigint_at_start) -> str | None:
        state = SimpleNamespace(stop_signal=None)
        previous = signal.signal(signal.SIGINT, sigint_at_start)
        stop = StopOnSignal(state)
        stop.install()
        try:
            for sig in signals:
                signal.raise_signal(sig)
        finally:
            stop.restore()
            assert signal.getsignal(signal.SIGINT) == sigint_at_start  # what was there before, back
            signal.signal(signal.SIGINT, previous)
        return state.stop_signal

    assert stopped_by(signal.SIGINT, sigint_at_start=signal.default_int_handler) == "SIGINT"
    assert stopped_by(signal.SIGINT, sigint_at_start=signal.SIG_IGN) is None
    assert stopped_by(signal.SIGINT, signal.SIGUSR2, sigint_at_start=signal.SIG_IGN) == "SIGUSR2"
    assert stopped_by(signal.SIGTERM, sigint_at_start=signal.SIG_IGN) == "SIGTERM"


# A training subprocess that SIGKILLs itself at the k-th checkpoint rename (before or after it).
KILLED_AT = """
import os, signal, sys
sys.path.insert(0, {root!r})
renames, real = [0], os.replace
def replace(src, dst):
    if str(dst).endswith(".pt"):
        renames[0] += 1
        if renames[0] == {k} and {before}:
            os.kill(os.getpid(), signal.SIGKILL)
        real(src, dst)
        if renames[0] == {k} and not {before}:
            os.kill(os.getpid(), signal.SIGKILL)
    else:
        real(src, dst)
os.replace = replace
from nmt import train
train.main(["--config", {config!r}, "--run-dir", {run_dir!r}])
"""


# Checkpoint renames of the 8-update run: 1 best.pt@4, 2 last.pt@4, 3 step_4.pt, 4 best.pt@8 or last.pt@8, ...
@pytest.mark.parametrize("k,before", [(1, True), (1, False), (2, False), (3, True), (4, True), (4, False)],
                         ids=["before-first-best", "between-best-and-last", "after-first-last", "in-step-copy",
                              "before-second-save", "after-second-save"])
def test_a_kill_at_any_checkpoint_write_resumes_to_the_same_weights(tiny_config, whole, tmp_path, k, before):
    run_dir = tmp_path / "run"
    code = KILLED_AT.format(root=str(ROOT), k=k, before=before, config=str(tiny_config), run_dir=str(run_dir))
    killed = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    if (run_dir / "checkpoints" / "last.pt").is_file():  # test.py works on the killed run as it is
        tested = subprocess.run([sys.executable, "test.py", "--run", str(run_dir)], cwd=ROOT, capture_output=True,
                                text=True, timeout=300)
        assert tested.returncode == 0, tested.stderr[-2000:]
    resumed = subprocess.run([sys.executable, "train.py", "--resume", str(run_dir)], cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert not list(run_dir.rglob("*.tmp"))  # the dead writer's temporary file is gone
    for name in ("last.pt", "best.pt"):
        assert same_weights(run_dir / "checkpoints" / name, whole / "checkpoints" / name), name
    assert points(run_dir, "train") == list(range(1, 9)) and points(run_dir, "valid") == [4, 8]
    assert not lock_path(run_dir).exists()


def wait_for_updates(run_dir: Path, proc: subprocess.Popen, n: int) -> None:
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if (run_dir / "metrics.jsonl").is_file() and len(points(run_dir, "train")) >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"the training did not reach {n} updates: {proc.poll()}")


def test_a_live_run_has_one_writer(tiny_config, tmp_path):
    run_dir = tmp_path / "run"
    live = subprocess.Popen([sys.executable, "train.py", "--config", str(tiny_config), "--run-dir", str(run_dir),
                             "train.max_steps=100000", "train.max_epochs=1000", "train.eval_every=0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_updates(run_dir, live, 3)
        for second in (["--resume", str(run_dir)],
                       ["--config", str(tiny_config), "--run-dir", str(run_dir), "--overwrite"],
                       ["--config", str(tiny_config), "--run-dir", str(run_dir)]):
            refused = subprocess.run([sys.executable, "train.py", *second], cwd=ROOT, capture_output=True,
                                     text=True, timeout=300)
            assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
            assert refused.stderr.startswith(f"error: run directory {run_dir} is being written by process {live.pid} ")
            assert len(refused.stderr.strip().splitlines()) == 1 and "--overwrite" not in refused.stderr
            assert live.poll() is None  # unharmed
    finally:
        live.send_signal(signal.SIGTERM)
        _, err = live.communicate(timeout=120)
    assert live.returncode == 0, err
    steps = points(run_dir, "train")
    assert steps == list(range(1, len(steps) + 1))  # one writer: no duplicate or lost rows
    assert not lock_path(run_dir).exists()  # released at exit


def test_a_dead_writers_lock_is_taken_over_with_a_warning(tiny_config, tmp_path, capsys):
    run_dir = tmp_path / "run"
    lock_path(run_dir).write_text(json.dumps({"pid": 999999, "host": "elsewhere", "since": "earlier"}))
    train.main(["--config", str(tiny_config), "--run-dir", str(run_dir), "train.max_steps=2"])
    assert ("warning: taking over the lock of" in capsys.readouterr().err
            and load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == 2)
    assert not lock_path(run_dir).exists()


def limit_file_size(limit: int):
    """preexec_fn: files may not grow past ``limit`` bytes; a write past it fails with EFBIG
    (SIGXFSZ, which would kill the process, is ignored: the disposition survives exec)."""
    def apply() -> None:
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


# 2 KB: the tokenizer or config; 60 KB and 300 KB: a checkpoint (best.pt 119 KB, last.pt with the
# optimizer 370 KB on this model), after some log points; torch.save reports these as an OSError
# (its RuntimeError path: the test after this one)
@pytest.mark.parametrize("limit", [2_000, 60_000, 300_000])
def test_a_refused_write_is_one_line_and_leaves_nothing_half_written(tiny_config, whole, tmp_path, limit):
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "train.py", "--config", str(tiny_config), "--run-dir", str(run_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=limit_file_size(limit))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[-1].startswith("error: cannot write ") and lines[-1].endswith(
        "File too large; raise the file-size limit (ulimit -f) or free space"), lines[-1]
    assert not [line for line in lines if line.startswith("error")][:-1]  # one error line
    assert not list(tmp_path.rglob("*.tmp")) and not lock_path(run_dir).exists()
    if not (run_dir / "checkpoints" / "last.pt").is_file():
        assert not run_dir.exists()  # a new run that could not reach its first checkpoint leaves nothing
        return
    for path in (run_dir / "checkpoints").glob("*.pt"):  # what is there under a final name is whole
        assert "model" in load_checkpoint(path)
    for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line)
    resumed = subprocess.run([sys.executable, "train.py", "--resume", str(run_dir)], cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert same_weights(run_dir / "checkpoints" / "last.pt", whole / "checkpoints" / "last.pt")


SAVE_UNDER_LIMIT = """
import sys, torch
sys.path.insert(0, {root!r})
from utils.errors import ResourceError
from utils.io import atomic_torch_save
atomic_torch_save({{"model": torch.ones(10)}}, {path!r})  # the previous version, small
try:
    atomic_torch_save({{"model": torch.zeros(100_000)}}, {path!r})
except ResourceError as err:
    print(err)
"""


def test_a_checkpoint_write_refused_inside_torch_save_is_one_line(tmp_path):
    """torch.save reports some refused writes as a RuntimeError from its zip writer (here: 400 KB
    against a 100 KB limit), not an OSError: still one line naming the file, the previous
    version intact, no temporary file left."""
    path = tmp_path / "last.pt"
    proc = subprocess.run([sys.executable, "-c", SAVE_UNDER_LIMIT.format(root=str(ROOT), path=str(path))],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=limit_file_size(100_000))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout.startswith(f"cannot write checkpoint {path}: ") and len(proc.stdout.splitlines()) == 1
    assert torch.equal(load_checkpoint(path)["model"], torch.ones(10))
    assert not list(tmp_path.glob("*.tmp"))
