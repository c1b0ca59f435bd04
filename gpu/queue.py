"""The GPU queue (``gpu/queue.yaml``): an ordered list of (study, rows, seeds) that a lent
GPU trains, and the runs each entry still needs — those its study's archive lacks.

A run is archived when its folder in the archive holds a finished manifest and, for every test set
the study tests on, a record decoded as the study decodes (``archived``). A wave trains the others:
``pending_runs`` lists them, each with the update its run folder under ``out`` reached (a
half-trained run on a still-warm machine is resumed, not restarted).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from experiment.decode_config import DecodeRecord, resolve_settings
from experiment.manifest import read_manifest
from experiment.run_dir import RunDir
from scoring.record import read_record
from studies.catalog import Study, load_studies
from studies.runs import queue, run_dir_of, variant_dir
from utils.config import load_structured
from utils.errors import UserError

QUEUE = Path(__file__).resolve().parent / "queue.yaml"


@dataclass
class EntryDeclaration:
    study: str = ""
    rows: list[str] | None = None  # default: every row of the study
    seeds: list[int] | None = None  # default: the study's seeds
    hold: str = ""  # why the entry waits (empty: ready)


@dataclass
class QueueDeclaration:
    entries: list[EntryDeclaration] = field(default_factory=list)


@dataclass(frozen=True)
class Entry:
    """One queue entry, resolved against its study."""

    study: Study
    runs: tuple[tuple[str, int], ...]  # (row label, seed), in the study's training order
    hold: str

    def describe(self) -> str:
        seeds = sorted({seed for _, seed in self.runs})
        rows = sorted({label for label, _ in self.runs})
        return (f"{self.study.name} seed{'s' * (len(seeds) != 1)} {','.join(map(str, seeds))} "
                f"({plural(len(rows), 'row')}, {plural(len(self.runs), 'run')})")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def load_queue(path: Path = QUEUE, studies: dict[str, Study] | None = None) -> list[Entry]:
    """The queue's entries; an unknown study, row or seed is one line naming the file."""
    declared = load_structured(QueueDeclaration, path)
    studies = load_studies() if studies is None else studies
    entries = []
    for number, item in enumerate(declared.entries, 1):
        where = f"{path}: entry {number}"
        if item.study not in studies:
            raise UserError(f"{where}: no study '{item.study}' (studies: {', '.join(sorted(studies))})")
        study = studies[item.study]
        if study.archive is None:
            raise UserError(f"{where}: the study '{item.study}' keeps no archive, so a wave's runs would not come back")
        rows = item.rows if item.rows is not None else study.schemes
        unknown = [row for row in rows if row not in study.schemes]
        if unknown:
            raise UserError(f"{where}: {', '.join(unknown)} not rows of '{study.name}' (rows: {', '.join(study.schemes)})")
        seeds = item.seeds or study.seeds
        runs = tuple((label, seed) for label, seed in queue(study) if label in rows and seed in seeds)
        if not runs:
            raise UserError(f"{where}: no run of '{study.name}' has those rows and seeds")
        entries.append(Entry(study, runs, item.hold))
    return entries


def archived(study: Study, label: str, seed: int) -> bool:
    """The archive holds the run finished and tested on every test set with the study's decoding, and
    decoded under each of its evaluation variants (their checkpoints never come back from a GPU)."""
    if study.archive is None:
        return False
    folder = study.archive / run_dir_of(study, label, seed).name
    if not read_manifest(folder).finished:  # no manifest: an empty one, not finished
        return False
    decodes = [(folder, study.config(label, seed))]
    decodes += [(variant_dir(folder, v), study.variant_config(label, seed, v)) for v in study.variants_of(label)]
    for path, cfg in decodes:
        wanted = DecodeRecord.of(resolve_settings(cfg.decode), 0).rule()
        for testset in study.test_sets(cfg.data.test_splits):
            record = RunDir(path).evaluation(testset).record
            if not record.is_file() or read_record(record).decode.rule() != wanted:
                return False
    return True


@dataclass(frozen=True)
class Pending:
    """A run a wave trains: its row, seed, and the update its run folder reached (0: a fresh start)."""

    label: str
    seed: int
    resume_from: int


def pending_runs(entry: Entry) -> list[Pending]:
    """The entry's runs its study's archive lacks, in the study's training order."""
    pending = []
    for label, seed in entry.runs:
        if archived(entry.study, label, seed):
            continue
        run_dir = run_dir_of(entry.study, label, seed)
        steps = read_manifest(run_dir).steps if RunDir(run_dir).last.is_file() else None
        pending.append(Pending(label, seed, steps or 0))
    return pending


def restricted(study: Study, runs: list[Pending]) -> Study:
    """The study cut to exactly ``runs`` (each row keeps the seeds it still needs): what the wave trains."""
    labels = [label for label in study.schemes if any(p.label == label for p in runs)]
    rows = {label: replace(study.row(label), seeds=tuple(p.seed for p in runs if p.label == label)) for label in labels}
    return replace(study, schemes=labels, rows={**study.rows, **rows})
