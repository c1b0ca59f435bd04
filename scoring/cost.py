"""What an archive of runs cost to train: hours per device, read from each run's manifest.

A manifest written since ``train_seconds`` existed holds the training's own wall time, summed over
the sessions of a stopped and resumed run. An older one holds only timestamps: for a run trained
in one go (first start = last start) the time from its start to its finish is its training time;
for a resumed one that span also holds the pause, so it is an upper bound and counted as such.
CPU core-hours are hours x the run's threads; a GPU's figure is process-hours (runs that shared a
GPU each count their whole time).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from experiment.manifest import read_manifest
from utils.errors import UserError


@dataclass(frozen=True)
class RunCost:
    """One run's training time: ``device`` (``CPU: <model>`` or the GPU's name), ``threads``,
    ``seconds``, and whether they are measured (``exact``) or an upper bound."""

    run: str
    device: str
    threads: int
    seconds: float
    exact: bool




def run_cost(run_dir: Path) -> RunCost:
    """The training time of one run (see the module docstring); a run without the manifest fields
    to tell is a one-line error naming it."""
    manifest = read_manifest(run_dir)
    if not manifest.device or not manifest.started:
        raise UserError(f"{run_dir}: its manifest names no device or start time; is it a trained run?")
    kind = f"CPU: {manifest.cpu or 'model not recorded'}" if manifest.on_cpu else manifest.device
    threads = manifest.threads or 1  # a run that recorded no thread count counts as one thread
    if manifest.train_seconds is not None:
        return RunCost(Path(run_dir).name, kind, threads, manifest.train_seconds, True)
    if not manifest.last_finished:
        raise UserError(f"{run_dir}: its manifest says the run has not finished (no last_finished)")
    started, finished = datetime.fromisoformat(manifest.started), datetime.fromisoformat(manifest.last_finished)
    once = (manifest.last_started or manifest.started) == manifest.started
    return RunCost(Path(run_dir).name, kind, threads, (finished - started).total_seconds(), once)


def cost_table(run_dirs: list[Path]) -> str:
    """Markdown: per device, the runs, their training hours, CPU core-hours (hours x threads; GPU:
    process-hours), and how many of the runs' figures are upper bounds; then the total (its core-hours
    only when every run is of one kind, CPU or GPU)."""
    costs = [run_cost(d) for d in run_dirs]
    lines = ["| device | runs | training hours | core-hours (CPU) / process-hours (GPU) | upper bounds |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for device in sorted({c.device for c in costs}):
        mine = [c for c in costs if c.device == device]
        hours = sum(c.seconds for c in mine) / 3600
        core = sum(c.seconds * (c.threads if device.startswith("CPU") else 1) for c in mine) / 3600
        lines.append(f"| {device} | {len(mine)} | {hours:.1f} | {core:.1f} | {sum(not c.exact for c in mine)} |")
    total = sum(c.seconds for c in costs) / 3600
    # CPU core-hours and GPU process-hours are different units: their sum is left blank
    kinds = {c.device.startswith("CPU") for c in costs}
    all_core = (f" {sum(c.seconds * (c.threads if c.device.startswith('CPU') else 1) for c in costs) / 3600:.1f} "
                if len(kinds) == 1 else " ")
    lines.append(f"| all | {len(costs)} | {total:.1f} |{all_core}| {sum(not c.exact for c in costs)} |")
    lines.append("")
    lines.append("Training only (testing adds about a minute a run). Upper bounds: runs stopped and resumed "
                 "before manifests recorded `train_seconds`, counted from first start to finish, pause included.")
    return "\n".join(lines) + "\n"
