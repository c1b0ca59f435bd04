"""A study's runs read once: every file a table reads of a run — its config, manifest, metric log, and
per test set the evaluation record, hypotheses, references and sources — loaded into typed objects at
this one edge (``load_runs``). Every table, family, bucket, ranking and cost line is then computed
from these objects, never from the files again; a table's own files are written at the other edge.

A study's archive keeps each test set once (``testsets/``) and rebuilds a joined set
(``<split>_concat<k>``) from it: one ``load_runs`` call reads and joins each stored set once for all
its runs (``Shelf``).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from experiment.config import Config
from experiment.manifest import Manifest, read_manifest
from experiment.marian import is_marian_folder
from experiment.run_dir import RunDir, read_metrics_log, run_config, run_config_tree
from scoring.metrics import References, Scored
from scoring.record import EvalRecord, read_record
from scoring.texts import Shelf, evaluation_texts, no_results
from utils.errors import UserError


@dataclass(frozen=True, eq=False)
class Evaluation:
    """A run's evaluation on one test set: its record and its N sentences' texts, line by line."""

    record: EvalRecord
    found_sources: list[str] | UserError  # the error saying why they cannot be found, raised when read
    references: list[str]
    hypotheses: list[str]
    tokenized: References | None = None  # the references for BLEU, shared by the load's runs scored on them

    @property
    def sources(self) -> list[str]:
        if isinstance(self.found_sources, UserError):
            raise self.found_sources
        return self.found_sources

    @property
    def scored(self) -> Scored:
        """The hypotheses scored against the references sentence by sentence, on first use (then kept:
        every table reads them, resampled alike)."""
        if "_scored" not in self.__dict__:
            references = self.references if self.tokenized is None else self.tokenized
            object.__setattr__(self, "_scored", Scored.of(self.hypotheses, references))
        return self.__dict__["_scored"]


@dataclass(frozen=True, eq=False)
class LoadedRun:
    """One run folder as the tables read it (a study's archived run, a run's own folder, a
    `transformers` Marian folder beside them)."""

    folder: Path
    tree: dict  # config.yaml as saved (what a recipe hash and an old run's precision read)
    config: Config
    manifest: Manifest
    metrics_log: list[dict]
    records: dict[str, EvalRecord]  # test set -> its evaluation's record
    evaluations: dict[str, Evaluation | UserError] = field(repr=False)  # a test set's texts not found: why
    marian: bool = False  # a `transformers` Marian folder: trained outside the suite

    @property
    def name(self) -> str:
        return self.folder.name

    def evaluation(self, testset: str) -> Evaluation:
        """The run's evaluation on ``testset``; a run without one is a one-line error with its remedy."""
        if testset not in self.evaluations:
            raise no_results(self.folder, testset)
        found = self.evaluations[testset]
        if isinstance(found, UserError):
            raise found
        return found

    @property
    def best_valid_loss(self) -> float | None:
        """The lowest validation loss in the metric log (None: no validation point)."""
        losses = [point["loss"] for point in self.metrics_log if point.get("kind") == "valid"]
        return min(losses) if losses else None


def load_run(folder: Path, shelf: Shelf | None = None) -> LoadedRun:
    """Every file of the run in ``folder`` a table reads (module doc); ``shelf`` shares the stored test
    sets of an archive between the runs of one load."""
    folder = Path(folder)
    tree = run_config_tree(folder)
    records, evaluations = {}, {}
    scored = RunDir(folder).evaluations
    for testset in sorted(p.name for p in scored.iterdir() if p.is_dir()) if scored.is_dir() else []:
        files = RunDir(folder).evaluation(testset)
        if files.record.is_file():
            record = records[testset] = read_record(files.record)
            try:
                sources, references, hypotheses = evaluation_texts(folder, testset, record, shelf)
                tokenized = shelf.references(references) if shelf is not None else None
                evaluations[testset] = Evaluation(record, sources, references, hypotheses, tokenized)
            except UserError as err:  # raised when a table reads this test set, not for the others'
                evaluations[testset] = err
    return LoadedRun(folder, tree, run_config(folder, tree), read_manifest(folder), read_metrics_log(folder),
                     records, evaluations, is_marian_folder(folder))


def load_runs(folders: Iterable[Path]) -> list[LoadedRun]:
    """The runs in ``folders``, in that order, each read once (``load_run``), the stored test sets once."""
    shelf = Shelf()
    return [load_run(folder, shelf) for folder in folders]


def as_loaded(runs: Sequence[LoadedRun | Path | str]) -> list[LoadedRun]:
    """``runs`` as loaded runs: run folders (a command's arguments, a test's) are loaded here, runs
    loaded already pass as they are."""
    shelf = Shelf()
    return [run if isinstance(run, LoadedRun) else load_run(Path(run), shelf) for run in runs]


def folder_of(run: LoadedRun | Path) -> Path:
    """The run's folder (of a loaded run, or the folder itself)."""
    return run.folder if isinstance(run, LoadedRun) else Path(run)


def manifest_of(run: LoadedRun | Path) -> Manifest:
    """The run's manifest (a loaded run's, or read from its folder: a caller that needs nothing else)."""
    return run.manifest if isinstance(run, LoadedRun) else read_manifest(run)
