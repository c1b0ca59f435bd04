"""Which machine each archive's runs ran on: one line per declared study and arithmetic, generated from
the archived manifests (``scoring.arithmetic``: the GPU model, or the CPU's model, kernels and threads;
torch; precision), with the days they trained and the runs ``gpu/queue.yaml`` still holds for it.

A study with no run yet says so: its first GPU wave fixes its card (``gpu.wave``'s preflight refuses
another), so the line a reader meets first is the one a later wave must match. docs/performance.md
shows the table under its marker; ``python -m nmt report`` writes it and ``--check`` keeps it equal.
"""
from __future__ import annotations

import collections
from dataclasses import replace
from pathlib import Path

from experiment.manifest import read_manifest
from experiment.run_dir import ArchiveDir
from gpu.queue import QUEUE, archived, load_queue
from reporting.sources import DECLARED
from scoring.arithmetic import arithmetic_of
from studies.catalog import Study
from utils.paths import ROOT

MACHINES_MARKER = ("<!-- which machine each archive's runs ran on, written by python -m nmt report from their "
                   "manifests and gpu/queue.yaml -->")
HEADER = ["| Study | Runs | Ran on (device, torch, precision) | Trained | Queued for a GPU |",
          "|---|---:|---|---|---:|"]


def in_checkout(study: Study, root: Path) -> Study:
    """``study`` with its archive read from ``root`` (the checkout the report is made from)."""
    archive = study.archive
    return replace(study, archive=Path(root) / archive.relative_to(ROOT)) if archive.is_relative_to(ROOT) else study


def queued_runs(root: Path) -> dict[str, int]:
    """Study name -> how many of its runs in ``gpu/queue.yaml`` the checkout's archive still lacks."""
    counts: collections.Counter[str] = collections.Counter()
    for entry in load_queue(QUEUE, DECLARED):
        study = in_checkout(entry.study, root)
        counts[study.name] += sum(not archived(study, label, seed) for label, seed in entry.runs)
    return dict(counts)


def study_lines(study: Study, queued: int) -> list[str]:
    """The study's lines: one per arithmetic its archived runs share (the most runs first), or one saying none ran."""
    runs = ArchiveDir(study.archive).runs() if study.archive.is_dir() else []
    waiting = str(queued) if queued else "—"
    if not runs:
        said = "no run yet: its first GPU wave fixes the card" if queued else "no run yet"
        return [f"| `{study.name}` | 0 | {said} | — | {waiting} |"]
    grouped: dict[str, list] = collections.defaultdict(list)
    for run in runs:
        grouped[arithmetic_of(run).describe()].append(read_manifest(run))
    lines = []
    for machine, manifests in sorted(grouped.items(), key=lambda item: (-len(item[1]), item[0])):
        days = sorted(day[:10] for m in manifests for day in (m.started, m.last_finished) if day)
        trained = "not recorded" if not days else days[0] if days[0] == days[-1] else f"{days[0]} – {days[-1]}"
        lines.append(f"| `{study.name}` | {len(manifests)} | {machine} | {trained} | {waiting} |")
        waiting = ""  # the queued count once per study
    return lines


def machines_table(root: Path = ROOT) -> str:
    """The marker, then the table (Markdown): every declared study that keeps an archive, in the order of
    their files' names."""
    queued = queued_runs(root)
    lines = [MACHINES_MARKER, *HEADER]
    for name, study in DECLARED.items():
        if study.archive is not None:
            lines += study_lines(in_checkout(study, root), queued.get(name, 0))
    return "\n".join(lines) + "\n"
