"""What an archive of runs cost to train: hours per device, read from each run's manifest; and per
scheme, the training time per 1,000 updates, the decoding speed and peak memory, as ratios to
sinusoidal only within runs that shared a machine the same way (same device, threads and number of
runs trained at once, as their manifests record: ``runs_sharing_machine``) — a run's timing says
nothing beside a run that trained on another machine or beside more neighbours.

A manifest written since ``train_seconds`` existed holds the training's own wall time, summed over
the sessions of a stopped and resumed run. An older one holds only timestamps: for a run trained
in one go (first start = last start) the time from its start to its finish is its training time;
for a resumed one that span also holds the pause, so it is an upper bound and counted as such.
CPU core-hours are hours x the run's threads; a GPU's figure is process-hours (runs that shared a
GPU each count their whole time).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from experiment.manifest import Manifest
from scoring.loaded import LoadedRun, folder_of, load_run, manifest_of
from scoring.table_rows import TOTAL, DeviceCost, SchemeCost, cost_csv, cost_markdown, scheme_cost_markdown
from utils.errors import UserError
from utils.io import atomic_write_text


@dataclass(frozen=True)
class RunCost:
    """One run's training time: ``device`` (``CPU: <model>`` or the GPU's name), ``threads``,
    ``seconds``, and whether they are measured (``exact``) or an upper bound."""

    run: str
    device: str
    threads: int
    seconds: float
    exact: bool




def run_cost(run: LoadedRun | Path) -> RunCost:
    """The training time of one run (loaded, or its folder: see the module docstring); a run without
    the manifest fields to tell is a one-line error naming it."""
    run_dir = folder_of(run)
    manifest = manifest_of(run)
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


def _sharing(manifest: Manifest) -> str | None:
    """How the run shared its machine (device, threads, runs at once), or None where unrecorded."""
    if manifest.runs_sharing_machine is None:
        return None
    device = f"CPU {manifest.cpu or 'model not recorded'}" if manifest.on_cpu else manifest.device
    threads = f", {manifest.threads} thread(s)" if manifest.on_cpu else ""
    return f"{device}{threads}, {manifest.runs_sharing_machine} run(s) at once"


def scheme_cost_lines(runs: Sequence[LoadedRun | Path], testset: str | None) -> list[SchemeCost]:
    """Per way of sharing a machine (in order) and per scheme (fastest first): the runs' mean training
    seconds per 1,000 updates and its ratio to sinusoidal's, and on ``testset`` their mean decoding
    speed and peak memory where recorded. Runs whose manifest does not say how they shared their
    machine are left out: their timings compare with nothing."""
    groups: dict[str, dict[str, list[tuple[float, float | None, float | None]]]] = {}
    for run in runs:
        manifest = manifest_of(run)
        sharing = _sharing(manifest)
        if sharing is None or not manifest.train_seconds or not manifest.steps:
            continue
        run = run if isinstance(run, LoadedRun) else load_run(Path(run))
        record = run.records.get(testset) if testset else None
        speed, peak = (record.sentences_per_second, record.decoding_peak_mib) if record is not None else (None, None)
        scheme = run.config.model.positional.name
        groups.setdefault(sharing, {}).setdefault(scheme, []).append(
            (manifest.train_seconds / manifest.steps * 1000, speed, peak))
    lines = []
    for sharing, schemes in sorted(groups.items()):
        base = schemes.get("sinusoidal")
        base_s = sum(v[0] for v in base) / len(base) if base else None
        for scheme, values in sorted(schemes.items(), key=lambda item: sum(v[0] for v in item[1]) / len(item[1])):
            mean = sum(v[0] for v in values) / len(values)
            speeds = [v[1] for v in values if v[1] is not None]
            peaks = [v[2] for v in values if v[2] is not None]
            lines.append(SchemeCost(sharing, scheme, len(values), mean, mean / base_s if base_s else None,
                                    sum(speeds) / len(speeds) if speeds else None, max(peaks) if peaks else None))
    return lines


def scheme_costs(lines: list[SchemeCost]) -> str:
    """Markdown of ``scheme_cost_lines``: a table per way of sharing a machine; one line saying why
    where no run recorded how it shared its machine."""
    if not lines:
        return ("Per scheme: not shown — no run's manifest records how many runs shared its machine "
                "(`runs_sharing_machine`, recorded since the arithmetic check), so their timings are not comparable.\n")
    text = []
    for sharing in dict.fromkeys(line.sharing for line in lines):
        text += ["", f"Per scheme, runs on {sharing}:", "",
                 *scheme_cost_markdown([line for line in lines if line.sharing == sharing])]
    return "\n".join(text).lstrip("\n") + "\n"


def cost_table(run_dirs: Sequence[LoadedRun | Path], testset: str | None = None) -> tuple[str, str]:
    """Markdown and CSV: per device, the runs, their training hours, CPU core-hours (hours x threads;
    GPU: process-hours), and how many of the runs' figures are upper bounds; then the total (its
    core-hours only when every run is of one kind, CPU or GPU); then the per-scheme costs
    (``scheme_cost_lines``, decoding on ``testset``)."""
    costs = [run_cost(d) for d in run_dirs]

    def line(device: str, runs: list[RunCost], summed: bool = True) -> DeviceCost:
        core = sum(c.seconds * (c.threads if c.device.startswith("CPU") else 1) for c in runs) / 3600
        return DeviceCost(device, len(runs), sum(c.seconds for c in runs) / 3600, core if summed else None,
                          sum(not c.exact for c in runs))

    devices = [line(device, [c for c in costs if c.device == device]) for device in sorted({c.device for c in costs})]
    # CPU core-hours and GPU process-hours are different units: a total over both is not summed
    total = line(TOTAL, costs, len({c.device.startswith("CPU") for c in costs}) == 1)
    schemes = scheme_cost_lines(run_dirs, testset)
    lines = [*cost_markdown([*devices, total]), ""]
    lines.append("Training only (testing adds about a minute a run). Upper bounds: runs stopped and resumed "
                 "before manifests recorded `train_seconds`, counted from first start to finish, pause included.")
    lines += ["", scheme_costs(schemes).rstrip("\n")]
    return "\n".join(lines) + "\n", cost_csv([*devices, total], schemes)


def write_cost(run_dirs: Sequence[LoadedRun | Path], out: Path, testset: str | None = None) -> tuple[Path, Path]:
    """``cost_table`` written to ``out`` (Markdown) and ``out`` with suffix .csv."""
    markdown, table_csv = cost_table(run_dirs, testset)
    out = Path(out)
    atomic_write_text(out, markdown)
    atomic_write_text(out.with_suffix(".csv"), table_csv)
    return out, out.with_suffix(".csv")
