"""Every table and CSV of a study's archive, remade from its archived runs alone (``nmt study NAME
--table``): per test set the comparison table and its significance groups, the declared families
of hypotheses (``families``; with ``buckets``, also within each source-length bucket), the
one-to-one tables the study declares (``compare``), the first seed's table and order beside all
seeds', the ranking against another study (``ranked_against``), the BLEU-by-length table
(``by_length``), BLEU against k on joined test sentences (``concat``), and the cost of training the runs. A missing optional input (the other study's
archive) is one line, skipped. Every table holds one arithmetic unless the study allows a mix
(``mixed_arithmetic``; and one commit unless ``mixed_code``; ``scoring.arithmetic``).

Here the study is loaded once and what its tables return is written once; each kind of table is a
function of the loaded study in ``studies.table_kinds``.
"""
from __future__ import annotations

from pathlib import Path

from experiment.run_dir import ArchiveDir, check_archive_layout
from scoring.loaded import LoadedRun, load_runs
from scoring.recipe import check_same_recipe
from scoring.table_metrics import STORE, MetricScores, scores_kept_in
from studies.catalog import Study, load_studies
from studies.declarations import check_declared_times
from studies.runs import label_of
from studies.table_kinds import Files, LoadedStudy, study_files
from utils.errors import UserError
from utils.io import atomic_write_text


def archived_runs(study: Study) -> list[Path]:
    """The run folders under the study's archive (it grows across sittings), sorted by name."""
    if study.archive is None or not study.archive.is_dir():
        return []
    check_archive_layout(study.archive)
    return ArchiveDir(study.archive).runs()


def archived_or_fail(study: Study) -> list[Path]:
    runs = archived_runs(study)
    if not runs and study.archive is None:  # --table remakes an archive's tables: this study writes its own
        raise UserError(f"the '{study.name}' study keeps no archive for --table to remake: `python -m nmt study "
                        f"{study.name}` trains its runs and writes its tables into {study.out}")
    if not runs:
        raise UserError(f"no archived runs under {study.archive}: `python -m nmt study {study.name}` trains them "
                        f"and archives each there")
    return runs


def other_studies_runs(study: Study, studies: dict[str, Study] | None) -> dict[str, list[LoadedRun]]:
    """The archived runs of each other study the tables of ``study`` read (``ranked_against``, an
    interaction family's), loaded once ([] for a study without an archive or not declared)."""
    names = study.other_studies()
    if not names:
        return {}
    studies = load_studies() if studies is None else studies
    return {name: load_runs(archived_runs(studies[name])) if name in studies else [] for name in sorted(names)}


def _ranking_inputs(study: Study, studies: dict[str, Study] | None, others: dict[str, list[LoadedRun]]):
    """The other study and its archived runs (in ``others``) for ``ranked_against``, or None (one line saying why)."""
    if not study.ranked_against:
        return None
    studies = load_studies() if studies is None else studies
    other = studies.get(study.ranked_against)
    other_runs = others.get(study.ranked_against, [])
    if not other_runs:
        print(f"[{study.name}] skipped the ranking against '{study.ranked_against}': no archived runs under "
              f"{other.archive if other is not None else 'that study (it is not declared)'}", flush=True)
        return None
    return other, other_runs


def varying_keys(study: Study) -> set[str]:
    """The config keys the study's declared rows and evaluation variants set apart (what its table may
    differ in besides scheme and seed)."""
    overrides = [o for row in study.rows.values() for o in row.overrides]
    overrides += [o for variant in study.variants.values() for o in variant.overrides]
    return {override.split("=", 1)[0].strip() for override in overrides}


def write_archive_tables(study: Study, studies: dict[str, Study] | None = None) -> list[Path]:
    """Every table of the study's archive from its archived runs alone (``write_tables``), each
    printed; ``studies`` (default: the declared ones) holds the study that a ``ranked_against`` or
    an interaction family names."""
    tables = write_tables(study, archived_or_fail(study), study.archive, studies)
    for table in tables:
        if table.suffix == ".md":
            print(table.read_text(encoding="utf-8"), end="")
    return tables


def write_tables(study: Study, runs: list[Path], folder: Path, studies: dict[str, Study] | None = None) -> list[Path]:
    """Every table of the study (module doc) from ``runs`` into ``folder`` — the archive's, or the
    output folder's of a study that keeps no archive: the study loaded once (``load_study``), its files
    made (``studies.table_kinds.study_files``), then written in one pass. Returns the paths written in the
    order they were made (each test set's comparison table first), and the metric scores they used are
    kept beside them (``scoring.table_metrics.scores_kept_in``)."""
    with scores_kept_in(folder / STORE) as scores:
        return write_files(folder, study_files(load_study(study, runs, studies, scores)))


def load_study(study: Study, runs: list[Path], studies: dict[str, Study] | None, scores: MetricScores) -> LoadedStudy:
    """The study's ``runs`` loaded once with the other studies' its tables read, after the checks every
    table relies on: each stated time against the study file's history, one recipe across the runs."""
    check_declared_times(study)
    loaded = load_runs(runs)
    check_same_recipe(loaded, varying_keys(study))
    studies = load_studies() if studies is None and study.other_studies() else studies
    others = other_studies_runs(study, studies)
    labels = {run.folder: label_of(run.folder) for run in loaded}
    return LoadedStudy(study=study, runs=loaded, others=others, ranked=_ranking_inputs(study, studies, others),
                       scores=scores, labels=labels)


def write_files(folder: Path, files: Files) -> list[Path]:
    """The one write pass: each text written atomically, each picture drawn, at its name under ``folder``."""
    return [atomic_write_text(folder / name, made) if isinstance(made, str) else made(folder / name)
            for name, made in files.items()]
