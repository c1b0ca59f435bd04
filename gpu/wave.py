"""A wave on a lent GPU (``python -m nmt gpu wave``, ``make gpu-wave``): the queue's next runs
(``gpu.queue``) trained in one call whose time is limited, every finished run packed at
once, so that a call cut at any moment still returns what finished.

1. **Preflight** (``preflight``: seconds, before any training): one line each for a GPU model or
   torch version other than the study's archived runs' (its first archived wave fixed them), a
   module the runs import that cannot be imported, data that is missing.
2. **Runs**: each ready entry in order, its pending runs at once (``nmt study NAME --missing
   --no-tail``, a child process; ``parallel`` caps how many train together), until the deadline.
3. **Packing**: whenever a run's archived folder is complete (``gpu_queue.archived``), its study's
   ``<out>/<study>.tar.xz`` is written again (atomically: a cut leaves the previous one whole) with
   every run archived by this wave and the archive's stored test sets. A run still training or
   being archived is never packed: its record for every test set is the last file it writes.
4. **The end**: at ``limit - margin`` seconds, or on SIGTERM/SIGINT, the child is stopped (SIGTERM,
   then SIGKILL after ``grace`` seconds), the packs are written a last time, and one line says what
   was done, the aggregate updates/s and what is next. ``<out>/wave.log`` keeps the whole story.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from experiment.manifest import read_manifest
from experiment.run_dir import ArchiveDir
from gpu.queue import Entry, Pending, archived, pending_runs, plural
from studies.runs import run_dir_of, run_log, with_variants
from utils.errors import UserError

MODULES = ("ignite", "nltk", "submitit", "sacrebleu", "sentencepiece", "yaml")  # what a study's runs import
MIB = 1024 * 1024
RETURNED_FILE_MIB = 16  # the most a GPU call brings back of one file


@dataclass(frozen=True)
class Machine:
    """What this machine is, as a run's manifest records it: the GPU's name (None: no CUDA device) and torch."""

    gpu: str | None
    torch: str | None


def this_machine() -> Machine:
    import torch

    from experiment.manifest import package_versions

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return Machine(gpu, package_versions().get("torch"))


def archived_machine(entry: Entry) -> Machine | None:
    """The GPU and torch of the study's archived runs (the first one's manifest), None before its first wave."""
    manifests = [read_manifest(run) for run in ArchiveDir(entry.study.archive).runs()] if entry.study.archive else []
    manifest = next((m for m in manifests if m.device), None)
    return Machine(manifest.device, manifest.packages.get("torch")) if manifest else None


def preflight(entries: Sequence[Entry], machine: Machine | None, modules: Sequence[str] = MODULES,
              importable: Callable[[str], bool] | None = None) -> list[str]:
    """What stops the wave before any training, one line each (empty: go); ``machine`` None: a wave
    on a CPU (a trial), whose card and torch are not checked."""
    import importlib

    def can_import(name: str) -> bool:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a broken install fails in any way; the line names the module
            return False
        return True

    importable = importable or can_import
    problems = []
    if machine is not None and machine.gpu is None:
        problems.append("no CUDA device: torch.cuda.is_available() is False on this machine")
    problems += [f"cannot import '{name}' (carry its wheel: make gpu-prep, then name .gpu in the call's carry)"
                 for name in modules if not importable(name)]
    for entry in entries:
        fixed = archived_machine(entry)
        if fixed is not None and machine is not None and machine.gpu is not None \
                and (fixed.gpu, fixed.torch) != (machine.gpu, machine.torch):
            problems.append(f"{entry.study.name}: its archived runs ran on {fixed.gpu} with torch {fixed.torch}, this "
                            f"machine is {machine.gpu} with torch {machine.torch}; one table holds one arithmetic")
        problem = missing_data(entry)
        if problem:
            problems.append(f"{entry.study.name}: {problem}")
    return list(dict.fromkeys(problems))


def missing_data(entry: Entry) -> str | None:
    """Why the entry's data cannot be read here (None: it can), without reading it."""
    from data.corpus import check_data_files

    label, seed = entry.runs[0]
    try:
        check_data_files(entry.study.config(label, seed).data)
    except UserError as err:
        return f"{err} (MULTI30K_DIR, or make gpu-prep's .gpu/data)"
    return None


def pack(study: str, archive: Path, runs: Sequence[Path], target: Path, root: Path,
         logs: Sequence[Path] = ()) -> Path:
    """``target`` (.tar.xz) rewritten atomically with ``runs`` (archived run folders) and the
    archive's stored test sets, paths relative to ``root`` (the checkout: unpacked there at home),
    and ``logs`` as ``logs/<study>/<name>`` (their last 200 kB: ``gpu.unpack`` keeps them apart)."""
    members = [(p, p.resolve().relative_to(root.resolve()).as_posix()) for run in runs for p in sorted(run.rglob("*"))
               if p.is_file() and not p.name.startswith(".")]
    stored = ArchiveDir(archive).testsets
    members += [(p, p.resolve().relative_to(root.resolve()).as_posix()) for p in sorted(stored.glob("*"))
                if p.is_file() and not p.name.startswith(".")]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=1) as tar:
        for path, name in members:
            _add(tar, name, path.read_bytes())
        for log in logs:
            if log.is_file():
                _add(tar, f"logs/{study}/{log.name}", log.read_bytes()[-200_000:])
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(buffer.getvalue())
    os.replace(tmp, target)
    if target.stat().st_size > RETURNED_FILE_MIB * MIB:
        print(f"warning: {target} holds {target.stat().st_size / MIB:.1f} MiB, over the {RETURNED_FILE_MIB} MiB a call "
              f"brings back of one file", file=sys.stderr)
    return target


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))


@dataclass
class WaveState:
    """What the wave has done so far (shared between its loop and the packer)."""

    packed: dict[str, list[Path]] = field(default_factory=dict)  # study -> archived run folders packed
    updates: int = 0  # of the runs packed
    stop: threading.Event = field(default_factory=threading.Event)
    stopped_by: str | None = None


def complete_runs(entry: Entry, pending: Sequence[Pending]) -> list[Path]:
    """The archived folders of the pending runs that are complete now."""
    return [entry.study.archive / run_dir_of(entry.study, p.label, p.seed).name for p in pending
            if archived(entry.study, p.label, p.seed)]


def study_command(entry: Entry, device: str, parallel: int | None) -> list[str]:
    """The child that trains an entry's pending runs (``nmt study --missing``: only those the archive lacks)."""
    rows = sorted({label for label, _ in entry.runs})
    seeds = sorted({seed for _, seed in entry.runs})
    command = [sys.executable, "-m", "nmt", "study", entry.study.name, "--schemes", *rows, "--seeds", *map(str, seeds),
               "--missing", "--no-tail", "--device", device]
    return command + (["--parallel", str(parallel)] if parallel else [])


@dataclass(frozen=True)
class WaveSummary:
    done: int
    updates: int
    seconds: float
    next_up: str
    stopped_by: str | None

    def line(self) -> str:
        rate = self.updates / self.seconds if self.seconds > 0 else 0.0
        stop = f"; stopped by {self.stopped_by}" if self.stopped_by else ""
        return (f"[wave] {plural(self.done, 'run')} done, {self.updates} updates in {self.seconds:.0f} s "
                f"({rate:.1f} updates/s in all){stop}; next: {self.next_up}")


def run_wave(entries: Sequence[Entry], out: Path, limit_s: float, root: Path, margin_s: float = 45.0,
             grace_s: float = 20.0, poll_s: float = 5.0, start_room_s: float = 60.0, device: str = "cuda",
             parallel: int | None = None,
             command: Callable[[Entry], list[str]] | None = None, log: Callable[[str], None] = print) -> WaveSummary:
    """The queue's ready entries trained in order within ``limit_s`` (module doc); an entry is not
    started with less than ``start_room_s`` seconds left before the deadline. Returns the summary."""
    started = time.monotonic()
    deadline = started + limit_s - margin_s
    out.mkdir(parents=True, exist_ok=True)
    state = WaveState()
    command = command or (lambda entry: study_command(entry, device, parallel))

    def on_signal(signum, _frame):
        state.stopped_by = state.stopped_by or signal.Signals(signum).name
        state.stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    next_up = "nothing: the queue's ready entries are archived"
    try:
        for index, entry in enumerate(entries):
            if entry.hold:
                log(f"[wave] {entry.describe()}: on hold ({entry.hold})")
                continue
            pending = pending_runs(entry)
            if not pending:
                log(f"[wave] {entry.describe()}: archived already")
                continue
            if state.stop.is_set() or time.monotonic() > deadline - start_room_s:
                log(f"[wave] {entry.describe()}: not started, {max(0.0, deadline - time.monotonic()):.0f} s left")
                next_up = entry.describe()
                break
            resumed = [p for p in pending if p.resume_from]
            log(f"[wave] {entry.describe()}: {plural(len(pending), 'run')} to train"
                + (f", {len(resumed)} resumed ({', '.join(f'{p.label}-seed{p.seed} from {p.resume_from}' for p in resumed)})"
                   if resumed else ""))
            packed = _train_entry(entry, pending, command(entry), out, root, deadline, grace_s, poll_s, state, log)
            left = [p for p in pending if entry.study.archive / run_dir_of(entry.study, p.label, p.seed).name
                    not in packed]
            if left:
                next_up = f"{entry.study.name}: {plural(len(left), 'run')} ({', '.join(f'{p.label}-seed{p.seed}' for p in left[:4])}" \
                          f"{', ...' if len(left) > 4 else ''})"
                break
            later = [e for e in entries[index + 1:] if not e.hold]
            next_up = later[0].describe() if later else "nothing: the queue's ready entries are done"
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    done = sum(len(runs) for runs in state.packed.values())
    summary = WaveSummary(done, state.updates, time.monotonic() - started, next_up, state.stopped_by)
    log(summary.line())
    return summary


def _train_entry(entry: Entry, pending: Sequence[Pending], command: list[str], out: Path, root: Path,
                 deadline: float, grace_s: float, poll_s: float, state: WaveState,
                 log: Callable[[str], None]) -> list[Path]:
    """One entry's child, watched: its finished runs packed as they come, stopped at the deadline or on a signal."""
    target = out / f"{entry.study.name}.tar.xz"
    packed = state.packed.setdefault(entry.study.name, [])

    logs = [run_log(entry.study, p.label, p.seed) for p in pending] + [out / f"{entry.study.name}.log"]

    def pack_new(force: bool = False) -> None:
        fresh = [run for run in complete_runs(entry, pending) if run not in packed]
        if fresh or force:
            packed.extend(fresh)
            state.updates += sum(read_manifest(run).steps or 0 for run in fresh)
            pack(entry.study.name, entry.study.archive, with_variants(entry.study, packed), target, root, logs)
            if fresh:
                log(f"[wave] packed {', '.join(run.name for run in fresh)} ({len(packed)} in {target.name})")

    with (out / f"{entry.study.name}.log").open("ab") as child_log:
        child = subprocess.Popen(command, stdout=child_log, stderr=subprocess.STDOUT, cwd=root, start_new_session=True)
        while child.poll() is None:
            if state.stop.wait(poll_s) or time.monotonic() > deadline:
                why = state.stopped_by or "the deadline"
                log(f"[wave] stopping {entry.study.name} ({why}): SIGTERM to its runs, {grace_s:.0f} s to save")
                _stop(child, grace_s)
                state.stopped_by = state.stopped_by or "the deadline"
                break
            pack_new()
    if child.returncode:
        log(f"[wave] {entry.study.name}: its runs' process ended with exit code {child.returncode} "
            f"(its output: {entry.study.name}.log)")
    pack_new(force=True)
    return packed


@contextlib.contextmanager
def mps_daemon(enabled: bool, log: Callable[[str], None] = print) -> Iterator[None]:
    """CUDA MPS for the runs started inside (``nvidia-cuda-mps-control -d``, its pipe and log folders
    under /tmp), quit at the end; the GPU's compute mode is never changed. Not ``enabled``, or no
    binary: nothing (one line says so)."""
    binary = shutil.which("nvidia-cuda-mps-control")
    if not enabled or binary is None:
        if enabled:
            log("[wave] --mps: no nvidia-cuda-mps-control on this machine; the runs share the GPU without MPS")
        yield
        return
    folders = {"CUDA_MPS_PIPE_DIRECTORY": "/tmp/nmt-mps/pipe", "CUDA_MPS_LOG_DIRECTORY": "/tmp/nmt-mps/log"}
    for folder in folders.values():
        Path(folder).mkdir(parents=True, exist_ok=True)
    saved = {key: os.environ.get(key) for key in folders}
    os.environ.update(folders)  # the children started inside reach the daemon through these
    started = subprocess.run([binary, "-d"], capture_output=True, text=True).returncode == 0
    log(f"[wave] CUDA MPS {'started' if started else 'failed to start'} ({folders['CUDA_MPS_PIPE_DIRECTORY']})")
    try:
        yield
    finally:
        if started:
            subprocess.run([binary], input="quit\n", capture_output=True, text=True)
            log("[wave] CUDA MPS quit")
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _stop(child: subprocess.Popen, grace_s: float) -> None:
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        pass
