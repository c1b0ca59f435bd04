"""Whether a pinned CPU arithmetic holds across CPUs: an archived run trained and tested again here,
under the pins its manifest records (PyTorch's kernel set, ``MKL_CBWR``, ``ONEDNN_MAX_CPU_ISA``, one
thread) as this CPU is, then with the CPU's AVX-512 hidden from every library that dispatches on it
(glibc's hwcaps tunable, MKL's instruction cap) — what an AVX2-only CPU would let them run — and once
without the pins (this CPU's own kernel set: the negative control, which differs wherever the CPU's
own set is not the pinned one). Each is compared with the archived run by its weight digest and its
test hypotheses, byte for byte.

    python -m nmt bench pins report/synthetic-length/sinusoidal [--out DIR]

A hidden instruction set is an emulation: a CPU of another model is the real test, which a study
resumed on another machine makes (its tables refuse a run whose pins differ).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from experiment.manifest import read_manifest
from experiment.run_dir import RunDir
from scoring.texts import hypotheses_of
from utils.device import MATH_PIN_VARIABLES, cpu_model
from utils.errors import UserError

HIDE_AVX512 = {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F,-AVX512CD,-AVX512BW,-AVX512DQ,-AVX512VL",
               "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
UNPINNED = ("ATEN_CPU_CAPABILITY", *MATH_PIN_VARIABLES, *HIDE_AVX512)


def recorded_pins(run: Path) -> dict[str, str]:
    """The environment that pins the archived run's arithmetic, from its manifest; a run without pins
    is a one-line error."""
    manifest = read_manifest(run)
    if not manifest.math_pins or not manifest.cpu_kernels:
        raise UserError(f"{run}: its manifest records no pinned arithmetic (math_pins); nothing to check")
    return {"ATEN_CPU_CAPABILITY": manifest.cpu_kernels.lower(), **manifest.math_pins}


def hypotheses(run: Path) -> dict[str, list[str]]:
    """Each test set's hypotheses of a run (a run folder's ``hyps.txt`` or an archive's ``hyps.txt.gz``), by test set."""
    return {folder.name: hypotheses_of(run, folder.name) for folder in sorted(RunDir(run).evaluations.iterdir())
            if folder.is_dir()}


def train_and_test(config: Path, folder: Path, env: dict[str, str]) -> None:
    """Train ``config`` into ``folder`` with one thread and test it, in child processes with ``env``."""
    for command in (["train", "--config", str(config), "--run-dir", str(folder), "--overwrite", "--threads", "1"],
                    ["test", "--run", str(folder), "--threads", "1"]):
        done = subprocess.run([sys.executable, "-m", "nmt", *command], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise UserError(f"nmt {command[0]} under {folder.name} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")


def compare(run: Path, out: Path) -> list[tuple[str, str, str, str]]:
    """Each arrangement: (name, its environment, weights as archived?, hypotheses as archived?)."""
    pins = recorded_pins(run)
    base = {k: v for k, v in os.environ.items() if k not in UNPINNED}
    arrangements = {"pinned, this CPU": {**base, **pins}, "pinned, AVX-512 hidden": {**base, **pins, **HIDE_AVX512},
                    "unpinned (this CPU's own kernels)": base}
    archived_digests, archived_hyps = read_manifest(run).rank_weight_digests, hypotheses(run)
    rows = []
    for i, (name, env) in enumerate(arrangements.items()):
        folder = out / f"arrangement{i + 1}"
        train_and_test(RunDir(run).config, folder, env)
        extra = " ".join(f"{k}={v}" for k, v in env.items() if k in UNPINNED) or "none"
        same_weights = read_manifest(folder).rank_weight_digests == archived_digests
        mine = hypotheses(folder)
        same_hyps = mine == archived_hyps
        rows.append((name, extra, "identical" if same_weights else "differ",
                     "identical" if same_hyps else f"differ ({sum(mine.get(k) != v for k, v in archived_hyps.items())} "
                                                   f"of {len(archived_hyps)} test sets)"))
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt bench pins",
                                     description="An archived run with pinned CPU arithmetic trained and tested again "
                                                 "here, pinned, pinned with AVX-512 hidden, and unpinned; each compared "
                                                 "with the archive (weights, hypotheses).")
    parser.add_argument("run", type=Path, help="an archived run whose manifest records math_pins")
    parser.add_argument("--out", type=Path, default=None, help="where to train the re-runs (default: a temporary folder)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        rows = compare(args.run, args.out or Path(scratch))
    print(f"{args.run} trained and tested again on {cpu_model()}:\n")
    print("| arrangement | environment | weights vs archived | hypotheses vs archived |\n| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0
