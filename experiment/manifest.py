"""The run manifest: DIR/manifest.json (``experiment.run_dir.RunDir.manifest``) — what trained the
run, where, for how long and how it ended. This module alone reads and writes it; every other one
sees the typed ``Manifest``.

Versions (``version``): 1, every manifest written before the field existed, whose keys came over
time (``cpu``, ``cpu_kernels``, ``threads`` and ``train_seconds`` since the study bookkeeping;
``precision``; ``update``; ``runs_sharing_machine`` and ``load_average``; ``math_pins``; ``plugins``), is migrated on
read — a run's thread count read from its device name
(``cpu (x86_64, 2 threads)``) where it lacks ``threads`` — so the archives committed under report/
are read as they are, never rewritten; 2 adds ``version``. A field a manifest does not record is
None (or empty): what follows from its absence is its reader's decision, named there.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import platform
import re
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from experiment.config import Config, config_hash
from experiment.run_dir import RunDir
from models.positional import scheme_names
from models.positional.plugins import SOURCES
from utils.device import device_name, host_record
from utils.errors import UserError
from utils.io import atomic_write_text, stored_version
from utils.job_schedulers import current_job

VERSION = 2
PACKAGES = ["torch", "pytorch-ignite", "sentencepiece", "sacrebleu", "transformers", "numpy", "nltk"]


@dataclass(frozen=True)
class Manifest:
    """One run's manifest (module doc); an empty one for a run that has none yet."""

    started: str | None = None  # first start (UTC, ISO 8601)
    last_started: str | None = None  # the latest session's start
    last_finished: str | None = None  # set when training ended at its budget or by early stopping
    last_stopped: str | None = None  # the latest session ended by a signal
    stopped_by: str | None = None  # that signal's name; None once a session finishes
    ended_by: str | None = None  # what ended training: its budget, early stopping, ...
    train_seconds: float | None = None  # training wall time over all sessions (None: not recorded)
    steps: int | None = None
    best_score: float | None = None
    git_commit: str | None = None
    packages: dict[str, str] = field(default_factory=dict)
    python: str | None = None
    device: str | None = None  # e.g. "cpu (x86_64, 2 threads)" or the GPU's name
    cpu: str | None = None  # the CPU model
    cpu_kernels: str | None = None  # PyTorch's CPU kernel set (ATEN_CPU_CAPABILITY)
    threads: int | None = None
    math_pins: dict | None = None  # MKL_CBWR, ONEDNN_MAX_CPU_ISA where set (utils.device.MATH_PIN_VARIABLES)
    # the plugin schemes the run uses: name -> {"file", "sha256"} or {"package", "version"} (models.positional.plugins)
    plugins: dict | None = None
    config_hash: str | None = None
    data_fingerprint: str | None = None
    seed: int | None = None
    world_size: int | None = None
    precision: str | None = None  # fp32, bf16 or fp16
    update: dict | None = None  # how the updates were computed (training.loop.update_record)
    parameters: int | None = None
    rank_weight_digests: list[str] = field(default_factory=list)
    extensions: list[dict] = field(default_factory=list)  # budgets raised after the run finished
    job: dict | None = None  # the scheduler job of the latest session (utils.job_schedulers)
    # the longest training pair in tokens ({"source": n, "target": m}, after every filter): the n_train
    # of test-time length settings (the length study's log-n scaling and rotary interpolation)
    longest_training_tokens: dict | None = None
    runs_sharing_machine: int | None = None  # runs the study trained at once on the machine (latest start)
    load_average: float | None = None  # the machine's 1-minute load average at the latest start
    thread_choice: str | None = None  # the threads at the latest start and why (utils.threads.ThreadChoice.reason)
    # --threads auto's re-divisions while training, every session's: [{"update": N, "threads": K}, ...]
    thread_changes: list[dict] | None = None
    version: int = VERSION

    @property
    def finished(self) -> bool:
        """Training ended at its budget or by early stopping, not stopped by a signal."""
        return bool(self.last_finished) and not self.stopped_by

    @property
    def on_cpu(self) -> bool:
        return (self.device or "cpu").startswith("cpu")


FIELDS = [f.name for f in dataclasses.fields(Manifest)]


def migrate(tree: dict) -> dict:
    """A manifest of any earlier version as the current version's fields."""
    tree, version = stored_version(tree, VERSION, "manifest")
    if version == 1:
        found = re.search(r"(\d+) threads?\)", str(tree.get("device", "")))
        if tree.get("threads") is None and found:
            tree["threads"] = int(found.group(1))
        tree["version"] = 2
    return tree


def read_manifest(run_dir: Path) -> Manifest:
    """DIR/manifest.json (migrated), or an empty ``Manifest`` for a run that has none yet; an
    unreadable or foreign file is one line naming it."""
    path = RunDir(run_dir).manifest
    if not path.is_file():
        return Manifest()
    try:
        tree = migrate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: cannot read the run manifest ({str(err).splitlines()[0]})") from None
    unknown = sorted(set(tree) - set(FIELDS))
    if unknown:
        raise UserError(f"{path}: not a run manifest of version {VERSION} (unknown key '{unknown[0]}')")
    return Manifest(**tree)


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def plugin_record(cfg: Config) -> dict | None:
    """Where each plugin scheme of ``cfg`` came from (``PluginSource.record``); None for built-ins only."""
    found = {name: SOURCES[name].record() for name in scheme_names(cfg.model.positional.name) if name in SOURCES}
    return found or None


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write_manifest(run_dir: Path, cfg: Config, device: torch.device, data_fingerprint: str,
                   train_seconds: float | None = None, **changes: Any) -> Manifest:
    """Write (or update) DIR/manifest.json: this session's machine and versions, and ``changes``
    (fields of ``Manifest``; an unknown one is a bug, raised). ``train_seconds``, when given, is the
    run's training wall time over all its sessions so far (``TrainState.train_seconds``); without
    it the recorded total stays (0 for a new run)."""
    unknown = sorted(set(changes) - set(FIELDS))
    if unknown:
        raise TypeError(f"not manifest fields: {', '.join(unknown)}")
    path = RunDir(run_dir).manifest
    tree = migrate(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else {"version": VERSION}
    tree.setdefault("started", now())
    tree["train_seconds"] = round(float(tree.get("train_seconds") or 0.0) if train_seconds is None
                                  else train_seconds, 1)
    tree.update({
        "git_commit": git_commit(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "device": device_name(device),
        **host_record(),
        "config_hash": config_hash(cfg),
        "data_fingerprint": data_fingerprint,
        "seed": cfg.seed,
        "plugins": plugin_record(cfg),
    })
    job = current_job()
    if job is not None:  # the latest session's job (a requeued run records where it finished)
        tree["job"] = job
    tree.update(changes)
    manifest = Manifest(**tree)  # checked before it is written
    atomic_write_text(path, json.dumps(tree, indent=2) + "\n")
    return manifest
