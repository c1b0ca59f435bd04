"""Runs that share a machine: whole ``nmt train`` processes of the demo's recipe
(``configs/synthetic/base.yaml``) launched one alone, two and four side by side, under each thread
setting, timed from launch to exit; every figure also as a ratio to one run alone under torch's
default measured in the same benchmark (this machine's speed varies up to threefold between days).

The settings: ``default`` (``--threads`` = the usable cores, torch's own choice before ``auto``:
what two users on one machine got), ``auto`` (no flag: ``utils.threads``), ``one``
(``--threads 1``) and ``passive`` (the cores, with ``OMP_WAIT_POLICY=PASSIVE``). Trials are
interleaved (each arrangement once, then again) so that a drift in the machine's speed touches all.

    python -m nmt bench threads --shared [--trials K] [--steps N] [--out FILE.json]
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from utils.errors import UserError
from utils.paths import ROOT
from utils.threads import THREADS_ENV, WAIT_ENV, this_process_cores

RECIPE = ROOT / "configs" / "synthetic" / "base.yaml"
SETTINGS = ("default", "auto", "one", "passive")
REFERENCE = (1, "default")
# (runs at once, setting), in the order measured and shown
ARRANGEMENTS = [(1, "default"), (1, "auto"), (1, "passive"),
                *[(n, s) for n in (2, 4) for s in SETTINGS]]


@dataclass(frozen=True)
class Measured:
    """The seconds of each run of one arrangement, over every trial."""

    runs: int
    setting: str
    seconds: list[float]

    @property
    def per_run(self) -> float:
        return mean(self.seconds)


def launch(setting: str, cores: int) -> tuple[list[str], dict[str, str]]:
    """The ``nmt train`` flags and the environment of one run under ``setting``: the user's own
    OpenMP settings removed so that each arrangement is what its name says."""
    env = {k: v for k, v in os.environ.items() if k not in (THREADS_ENV, WAIT_ENV)}
    flags = {"default": ["--threads", str(cores)], "auto": [], "one": ["--threads", "1"],
             "passive": ["--threads", str(cores)]}[setting]
    if setting == "passive":
        env[WAIT_ENV] = "PASSIVE"
    return flags, env


def side_by_side(runs: int, setting: str, folder: Path, steps: int | None, cores: int) -> list[float]:
    """Seconds from launch to exit of each of ``runs`` trainings started at once under ``setting``."""
    flags, env = launch(setting, cores)
    budget = [f"train.max_steps={steps}"] if steps else []
    procs, logs = [], []
    start = time.perf_counter()
    for i in range(runs):
        log = open(folder / f"{setting}-{runs}-{i}.log", "w")  # noqa: SIM115 -- closed below
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, "-m", "nmt", "train", "--config", str(RECIPE), "--run-dir",
                                       str(folder / f"run{i}"), "--overwrite", *flags, *budget],
                                      cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
    ended = [0.0] * runs

    def wait(i: int) -> None:
        procs[i].wait()
        ended[i] = time.perf_counter() - start

    waiters = [threading.Thread(target=wait, args=(i,)) for i in range(runs)]
    for w in waiters:
        w.start()
    for w in waiters:
        w.join()
    for log in logs:
        log.close()
    failed = [i for i, p in enumerate(procs) if p.returncode != 0]
    if failed:
        tail = (folder / f"{setting}-{runs}-{failed[0]}.log").read_text().strip().splitlines()[-1:]
        raise UserError(f"a training of the {runs} x {setting} arrangement failed: {' '.join(tail)}")
    return ended


def measure(trials: int = 1, steps: int | None = None,
            arrangements: list[tuple[int, str]] | None = None) -> list[Measured]:
    """Every arrangement ``trials`` times, interleaved; the reference first in each trial."""
    arrangements = arrangements or ARRANGEMENTS
    if REFERENCE not in arrangements:
        arrangements = [REFERENCE, *arrangements]
    cores = this_process_cores().usable
    seconds: dict[tuple[int, str], list[float]] = {a: [] for a in arrangements}
    with tempfile.TemporaryDirectory(prefix="nmt-bench-shared-") as tmp:
        for trial in range(trials):
            for runs, setting in arrangements:
                took = side_by_side(runs, setting, Path(tmp), steps, cores)
                seconds[(runs, setting)] += took
                print(f"trial {trial + 1}: {runs} x {setting}: " + ", ".join(f"{s:.1f}" for s in took) + " s",
                      file=sys.stderr, flush=True)
    return [Measured(runs, setting, s) for (runs, setting), s in seconds.items()]


def table(measured: list[Measured]) -> str:
    """A Markdown table: seconds per run (mean; each run) and the ratio to one alone under default."""
    ref = next(m for m in measured if (m.runs, m.setting) == REFERENCE).per_run
    lines = ["| runs at once | threads | seconds per run (mean) | each run | × one alone (default) |",
             "| ---: | --- | ---: | --- | ---: |"]
    for m in measured:
        each = ", ".join(f"{s:.0f}" for s in m.seconds)
        lines.append(f"| {m.runs} | {m.setting} | {m.per_run:.1f} | {each} | {m.per_run / ref:.2f}× |")
    return "\n".join(lines)


def targets(measured: list[Measured]) -> list[tuple[str, str, bool]]:
    """Issue 88's targets: two side by side under auto at most 2.2x one alone (default); one alone
    under auto within 5 % of default. (description, figure, met)"""
    by = {(m.runs, m.setting): m.per_run for m in measured}
    ref, rows = by[REFERENCE], []
    if (2, "auto") in by:
        ratio = by[(2, "auto")] / ref
        rows.append(("two side by side under auto ≤ 2.2× one alone", f"{ratio:.2f}×", ratio <= 2.2))
    if (1, "auto") in by:
        ratio = by[(1, "auto")] / ref
        rows.append(("one alone under auto within 5 % of default", f"{ratio:.3f}×", abs(ratio - 1) <= 0.05))
    return rows
