"""What the report reads, and how: the studies it shows (an archive folder and its test sets, under
a name the readings use), the figures, and readers for the archived files — comparison tables
(CSV, or Markdown where an archive kept no CSV), significance groups, ``cost.csv``, rankings, the
first run's config and the archived benchmark (``report/bench/bench.json``)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from experiment.config import Config
from experiment.manifest import Manifest, read_manifest
from experiment.run_dir import ArchiveDir, check_archive_layout, run_config
from scoring.groups import groups_path
from scoring.table_rows import (
    TOTAL,
    ComparisonTable,
    DeviceCost,
    GroupsTable,
    Hypothesis,
    cost_from_csv,
    family_from_csv,
)
from studies.catalog import Study, load_studies
from utils.errors import UserError
from utils.paths import ROOT


@dataclass(frozen=True)
class Archive:
    """A study as the report shows it (its file's ``report:`` section, ``studies.catalog.ReportDeclaration``):
    its folder under ``report/``, its test sets (the first is the one a reading means unless it names
    ``second``), what a table's caption says of it (with placeholders, as in a reading), and the declared
    study (``studies/<name>.yaml``) that made it."""

    folder: str
    testsets: tuple[str, ...]
    caption: str
    study: str | None = None
    called: str = ""  # how a claim's clause names the study where it compares two ("the full budget")


def report_studies(studies: dict[str, Study]) -> dict[str, Archive]:
    """The studies report.md shows, by the alias their files' ``report:`` section gives them, in the
    order of the files' names; two of one alias are a one-line error."""
    shown: dict[str, Archive] = {}
    for name, study in studies.items():
        view = study.report
        if view is None:
            continue
        if view.alias in shown:
            raise UserError(f"studies {shown[view.alias].study} and {name} both give report.alias '{view.alias}'")
        folder = study.archive.relative_to(ROOT).as_posix() if study.archive.is_relative_to(ROOT) else str(study.archive)
        shown[view.alias] = Archive(folder, tuple(view.test_sets), view.caption, name, view.called)
    return shown


DECLARED: dict[str, Study] = load_studies()  # the declared studies (``studies/*.yaml``), read once at import
STUDIES = report_studies(DECLARED)
TESTSET_NAMES = ("first", "second")  # how a reading names a study's test sets (no digits in readings)

FIGURES = {
    "demo": ("report/figures/demo_all_bleu_by_length.png",
             "BLEU and length ratio by source length, every scheme of the synthetic study"),
    "curves": ("report/figures/multi30k_short_validation_by_scheme.png",
               "Validation BLEU of every 800-update run against updates, a panel per scheme (each seed; grey: "
               "sinusoidal's mean)"),
    "budgets": ("report/multi30k-short-h100/ranking_vs_multi30k-best-all_test_2016_flickr.png",
                "Each scheme's BLEU at the full budget (open) and after 800 updates of the same recipe (filled), "
                "test_2016_flickr"),
    "validation": ("report/figures/multi30k_full_validation_by_scheme.png",
                   "Validation BLEU of every full-budget run against updates, a panel per scheme (three seeds; grey: "
                   "sinusoidal's mean; dotted: update 800, where these runs, under the full budget's schedule, have "
                   "no validation point)"),
    "extrapolation": ("report/figures/multi30k_extrapolation_bleu_by_length.png",
                      "BLEU by source length when training saw sources of up to 15 words"),
    "attention": ("report/figures/multi30k_rope_cross_attention_layer2.png",
                  "Cross-attention of a Multi30k RoPE run (last layer)"),
    "explorer": ("report/figures/demo_explorer.png", "The explorer page of a study"),
    "length_kinds": ("report/figures/synthetic_length_by_kind.png",
                     "BLEU and length ratio by source length, trained on 3–12 words, a panel per kind of scheme (mean "
                     "of five seeds, band: lowest to highest seed)"),
    "length_settings": ("report/figures/synthetic_length_settings.png",
                        "The rotary rows as trained and under each test-time setting, by source length (mean of five "
                        "seeds, band: lowest to highest seed)"),
}
KERNELS = ("report/demo-kernels", ("default", "avx2", "avx512"))
BENCH = "report/bench/bench.json"
SEED_PROJECT = "../shared/reference/seed_project_results.md"


def resolve(root: Path, relative: str) -> Path:
    return Path(root) / relative


def table_path(study: str, testset: str, versus: str | None = None) -> str:
    """The study's archived comparison table (Markdown; its CSV twin beside it), relative to the root;
    with ``versus``, the table of the rows against that scheme (``comparison_vs_<scheme>_<test set>``)."""
    return f"{STUDIES[study].folder}/comparison_{f'vs_{versus}_' if versus else ''}{testset}.md"


def groups_table_path(study: str, testset: str) -> str:
    """Where the table command archived that table's significance groups (``scoring.groups``)."""
    return groups_path(Path(table_path(study, testset))).as_posix()


def read_text(path: Path) -> str:
    """The text of an archived file the report needs; a missing one is a one-line error."""
    if not path.is_file():
        raise UserError(f"the report needs {path}, which does not exist (regenerate the archive's tables)")
    return path.read_text(encoding="utf-8")


def read_table(root: Path, study: str, testset: str, versus: str | None = None) -> ComparisonTable:
    """The archived comparison table (rows best first), read from its CSV; ``versus`` as in ``table_path``."""
    path = resolve(root, table_path(study, testset, versus)).with_suffix(".csv")
    return ComparisonTable.from_csv(read_text(path), str(path))


def read_groups(root: Path, study: str, testset: str) -> GroupsTable | None:
    """The archived significance groups (``groups_<test set>.csv``: each row's letters, every pair's
    test); None where the archive has no groups (tables-only archives)."""
    path = resolve(root, groups_table_path(study, testset)).with_suffix(".csv")
    return GroupsTable.from_csv(read_text(path), str(path)) if path.is_file() else None


def interaction_of(study: str, family: str) -> str | None:
    """The other declared study of ``family`` where it is an interaction family of the report's ``study``
    (its differences are changes of a gap between two studies), else None."""
    made_by = STUDIES[study].study
    declared = DECLARED.get(made_by) if made_by else None
    found = declared.families.get(family) if declared is not None else None
    return found.interaction if found is not None else None


def archived_families(root: Path, study: str, testset: str) -> dict[str, list[Hypothesis]]:
    """The study's declared families archived for ``testset`` (``family_<name>_<test set>.csv``,
    ``scoring.families``): name -> its tested hypotheses, in declaration order."""
    folder = resolve(root, STUDIES[study].folder)
    return {path.stem[len("family_"):-len(f"_{testset}")]: family_from_csv(read_text(path), str(path))
            for path in sorted(folder.glob(f"family_*_{testset}.csv"))}


def read_cost(root: Path, study: str) -> DeviceCost | None:
    """The total line of the archive's ``cost.csv`` (runs, training hours, core-hours), or None."""
    path = resolve(root, STUDIES[study].folder) / "cost.csv"
    if not path.is_file():
        return None
    total = next((line for line in cost_from_csv(read_text(path), str(path))[0] if line.device == TOTAL), None)
    if total is None:
        raise UserError(f"{path} has no '{TOTAL}' line (remake the tables)")
    return total


def read_tau(root: Path, study: str, testset: str) -> str | None:
    """Kendall's tau-b of the archive's ranking against another study's, or None."""
    for path in sorted(resolve(root, STUDIES[study].folder).glob(f"ranking_vs_*_{testset}.md")):
        found = re.search(r"Kendall's tau-b between the two orders of these \d+ schemes: (-?[0-9.]+)",
                          path.read_text(encoding="utf-8"))
        if found:
            return found.group(1)
    return None


def archived_run_dirs(root: Path, study: str) -> list[Path]:
    """The archive's run folders by name (a run folder holds its resolved config); none for an
    archive of tables only or a missing folder. An archive in the old layout is refused."""
    folder = resolve(root, STUDIES[study].folder)
    check_archive_layout(folder)
    return ArchiveDir(folder).runs()


def first_run(root: Path, study: str) -> Path:
    """The archive's first run folder."""
    runs = archived_run_dirs(root, study)
    if not runs:
        raise UserError(f"{resolve(root, STUDIES[study].folder)} holds no archived run")
    return runs[0]


def first_config(root: Path, study: str) -> Config:
    """The resolved config of the archive's first run, typed (read through the schema: a key an older
    archive's config lacks reads as the default it was)."""
    return run_config(first_run(root, study))


def trained_on_gpu(root: Path, study: str) -> bool:
    """Whether the archive's runs trained on a GPU (its first run's manifest; False for an archive of tables only)."""
    runs = archived_run_dirs(root, study)
    return bool(runs) and not read_manifest(runs[0]).on_cpu


def first_manifest(root: Path, study: str) -> Manifest:
    """The manifest of the archive's first run."""
    return read_manifest(first_run(root, study))


def read_bench(root: Path) -> dict | None:
    """The archived benchmark (``make bench``'s bench.json, copied to ``report/bench/``), or None."""
    path = resolve(root, BENCH)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
