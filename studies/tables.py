"""Every table and CSV of a study's archive, remade from its archived runs alone (``nmt study NAME
--table``): per test set the comparison table and its significance groups, the declared families
of hypotheses (``families``; with ``buckets``, also within each source-length bucket), the
one-to-one tables the study declares (``compare``), the first seed's table and order beside all
seeds', the ranking against another study (``ranked_against``), the BLEU-by-length table
(``by_length``), BLEU against k on joined test sentences (``concat``), and the cost of training the runs. A missing optional input (the other study's
archive) is one line, skipped. Every table holds one arithmetic unless the study allows a mix
(``mixed_arithmetic``; and one commit unless ``mixed_code``; ``scoring.arithmetic``).
"""
from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from analysis.pictures import by_group_size, by_position, two_orders
from analysis.results import length_study
from experiment.run_dir import ArchiveDir, check_archive_layout
from models.positional import KINDS, scheme_kind
from scoring.arithmetic import Allowance
from scoring.buckets import write_bucket_tables
from scoring.compare import write_comparison
from scoring.cost import write_cost
from scoring.families import write_family
from scoring.groups import groups_path, write_groups
from scoring.joined import joined_csv, joined_points
from scoring.loaded import LoadedRun, folder_of, load_runs, manifest_of
from scoring.positions import position_points, positions_csv
from scoring.ranking import compare_rankings, scheme_bleu
from scoring.recipe import check_same_recipe
from scoring.significance import BASELINE
from scoring.table_metrics import STORE, MetricScores, scores_kept_in
from studies.catalog import Study, load_studies
from studies.declarations import check_declared_times
from studies.runs import label_of, variant_of
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


def first_seed_tables(runs: list[LoadedRun], testset: str, folder: Path, metrics: list[str] | None = None,
                      mixed: Allowance = False, labels: dict[Path, str] | None = None,
                      scores: MetricScores | None = None) -> list[Path]:
    """What the table said with its first seed alone, beside what it says with every seed (in
    ``folder``): for runs with several seeds of some scheme, ``comparison_seed<S>_<test set>.md`` (+ CSV) of the
    runs of the first seed ``S``, and ``ranking_seed<S>_vs_all_<test set>.md``, that order beside the
    order of the means over all seeds (Kendall's tau-b, each gap to sinusoidal and how it moved).
    None when every scheme has one seed or the first seed lacks sinusoidal or a second scheme."""
    first = min(run.config.seed for run in runs)
    first_runs = [run for run in runs if run.config.seed == first]
    first_bleu = scheme_bleu(first_runs, testset)
    if len(first_runs) == len(runs) or len(first_bleu) < 2 or BASELINE not in first_bleu:
        return []
    table, _ = write_comparison(first_runs, testset, folder / f"comparison_seed{first}_{testset}.md", metrics=metrics,
                                allow_mixed_arithmetic=mixed, labels=labels, scores=scores)
    ranking = atomic_write_text(folder / f"ranking_seed{first}_vs_all_{testset}.md", compare_rankings(
        first_bleu, scheme_bleu(runs, testset), (f"seed {first} alone", "mean over all seeds")))
    return [table, ranking]


def ranking_files(ranking: Path, other_runs: list[LoadedRun], runs: list[LoadedRun], testset: str,
                  names: tuple[str, str]) -> Path:
    """Two studies' orders of their schemes on ``testset``: the table (``ranking``, Kendall's tau-b)
    and beside it the picture of each scheme's BLEU in both (same name, .png)."""
    first, second = scheme_bleu(other_runs, testset), scheme_bleu(runs, testset)
    atomic_write_text(ranking, compare_rankings(first, second, names))
    two_orders(first, second, names, f"Each scheme's BLEU in both studies ({testset})", ranking.with_suffix(".png"))
    return ranking


def one_to_one_tables(study: Study, runs: list[LoadedRun], testset: str, folder: Path,
                      scores: MetricScores | None = None) -> list[Path]:
    """The study's ``compare`` tables on ``testset`` in ``folder``: for each baseline row, that row and
    the rows declared against it (``all``: every row), ``comparison_vs_<baseline>_<test set>.md`` (+ CSV)."""
    tables = []
    for baseline, members in study.compare.items():
        wanted = None if members == "all" else {baseline, *members}
        chosen = [run for run in runs if wanted is None or label_of(run.folder) in wanted]
        base = next((run for run in chosen if label_of(run.folder) == baseline), None)
        if base is None:
            print(f"[{study.name}] skipped comparison_vs_{baseline}_{testset}: no run of '{baseline}'",
                  flush=True)
            continue
        table, _ = write_comparison(chosen, testset, folder / f"comparison_vs_{baseline}_{testset}.md", base,
                                    study.metrics, study.mixing, {run.folder: label_of(run.folder) for run in chosen},
                                    scores)
        tables.append(table)
    return tables


def by_length_table(runs: list[LoadedRun], folder: Path) -> list[Path]:
    """``length_study``'s table in ``folder``, Markdown and CSV, rows named by their study labels (its
    picture is drawn, then left: a study's pictures are in its output folder)."""
    with tempfile.TemporaryDirectory() as scratch:
        folders = [run.folder for run in runs]
        made = [path for path in length_study(folders, Path(scratch), labels={f: label_of(f) for f in folders})
                if path.suffix in (".md", ".csv")]
        # read as bytes: read_text would turn the CSV's CRLF line ends into LF
        targets = [atomic_write_text(folder / table.name, table.read_bytes().decode("utf-8")) for table in made]
        shutil.rmtree(scratch, ignore_errors=True)
    return targets


def joined_files(study: Study, runs: list[LoadedRun], folder: Path) -> list[Path]:
    """Per test split, BLEU and length ratio against k (1 and the study's ``concat``): the CSV
    ``joined_<split>.csv`` and its figure beside it, a panel per kind of scheme; and BLEU of each
    position inside the joined inputs (``positions_<split>.csv`` and its figure)."""
    made = []
    labels = {run.folder: label_of(run.folder) for run in runs}
    kinds = {labels[run.folder]: scheme_kind(run.config.model.positional.name) for run in runs}
    for split in runs[0].config.data.test_splits:
        points = joined_points(runs, split, study.concat, labels)
        table = atomic_write_text(folder / f"joined_{split}.csv", joined_csv(points))
        by_group_size(points, kinds, KINDS, f"{study.name}: {split}, k consecutive sentences as one input",
                      table.with_suffix(".png"))
        made += [table, table.with_suffix(".png")]
        positions = position_points(runs, split, study.concat, labels)
        scores = atomic_write_text(folder / f"positions_{split}.csv", positions_csv(positions))
        by_position(positions, kinds, KINDS, f"{study.name}: {split}, BLEU of each sentence inside k joined "
                    f"(re-segmented onto its references)", scores.with_suffix(".png"))
        made += [scores, scores.with_suffix(".png")]
    return made


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


def family_standing(study: Study, name: str, runs: Sequence[LoadedRun | Path], other_runs: Sequence[LoadedRun | Path] = (),
                    testsets: Sequence[str] = ()) -> str:
    """Whether family ``name`` was declared before the first of ``runs`` (and ``other_runs``, an
    interaction's other study) started — confirmatory — or after, exploratory: the sentence a
    family's caption and the report's claims carry; "" for a family with no declared time. In a
    study that declares its test sets (``test_sets``), the family is confirmatory on the primary
    ones alone (``testsets``: those its table reads; the secondary ones make it exploratory), and
    only where the test sets too were declared before the first run."""
    family = study.families.get(name)
    if family is None:
        return ""
    declared, sets = family.declared, study.test_standing
    secondary = [t for t in testsets if sets is not None and not sets.is_primary(t)]
    if secondary:
        return (f"Exploratory: {', '.join(secondary)} {'is a secondary test set' if len(secondary) == 1 else 'are secondary test sets'} "
                f"(the confirmatory tests are read on {', '.join(sets.primary)}, declared {sets.declared:%Y-%m-%d %H:%M} "
                f"UTC: {sets.why.rstrip('.')}); no claim of the abstract rests on it")
    if sets is not None and sets.declared > declared:
        declared = sets.declared  # confirmatory only if the test sets were fixed before the runs as well
    starts = [dt.datetime.fromisoformat(s) for s in (manifest_of(r).started for r in [*runs, *other_runs]) if s]
    when = f"{declared:%Y-%m-%d %H:%M} UTC" + (f" with its test sets ({', '.join(testsets)})" if sets else "")
    if not starts:
        return f"Confirmatory: declared {when}, before any run"
    first = min(starts).astimezone(dt.UTC)
    if declared < first:
        return f"Confirmatory: declared {when}, before the first run ({first:%Y-%m-%d %H:%M} UTC)"
    return (f"Exploratory: declared {when}, after the first run ({first:%Y-%m-%d %H:%M} UTC), with results in view; "
            "no claim of the abstract rests on it")


def family_files(study: Study, runs: list[LoadedRun], testset: str, others: dict[str, list[LoadedRun]],
                 folder: Path) -> list[Path]:
    """The table of each declared family on ``testset`` in ``folder``; an interaction family's needs the
    other study's archived runs (``others``: ``other_studies_runs``; skipped with one line while it has none)."""
    made = []
    for name, family in study.families.items():
        other_name, other_runs = family.interaction, []
        if other_name is not None:
            other_runs = others[other_name]
            if not other_runs:
                print(f"[{study.name}] skipped family '{name}' on {testset}: no archived runs of {other_name}",
                      flush=True)
                continue
        labels = {run.folder: label_of(run.folder) for run in [*runs, *other_runs]}
        tested, standing = rows_with_runs(study, name, [testset], list(family.pairs), labels, runs, other_runs)
        if not tested:  # a study part-way through: none of the family's pairs has runs on both sides yet
            print(f"[{study.name}] skipped family '{name}' on {testset}: none of its pairs has runs yet", flush=True)
            continue
        made.append(write_family(runs, testset, folder, name, tested, study.mixing, labels, standing,
                                 (other_name, other_runs) if other_name else None, family.margin)[0])
    return made


def rows_with_runs(study: Study, name: str, testsets: Sequence[str], pairs: list[tuple[str, str]],
                   labels: dict[Path, str], runs: Sequence[LoadedRun | Path],
                   other_runs: Sequence[LoadedRun | Path]) -> tuple[list[tuple[str, str]], str]:
    """The family's pairs whose rows both have runs here (and in an interaction's other study), and its
    standing sentence on ``testsets`` (the sets its table reads), which names the declared rows left out for want of runs — a scheme registered
    after the study's runs (``schemes: all``), until its runs are archived; Holm's m counts the pairs tested."""
    here = {labels[folder_of(r)] for r in runs}
    there = {labels[folder_of(r)] for r in other_runs} if other_runs else here
    tested = [(a, b) for a, b in pairs if {a, b} <= here & there]
    notes = [family_standing(study, name, runs, other_runs, testsets), added_note(study, name, tested)]
    missing = sorted({label for pair in pairs for label in pair} - (here & there))
    if missing:
        print(f"[{study.name}] family '{name}' on {' + '.join(testsets)}: left out {', '.join(missing)} (no runs yet)", flush=True)
        left = len(pairs) - len(tested)
        notes.append(f"Also declared, without runs yet and so left out: {', '.join(f'`{m}`' for m in missing)} "
                     f"({left} {'hypothesis' if left == 1 else 'hypotheses'}; Holm over the {len(tested)} tested)")
    return tested, ". ".join(note for note in notes if note)


def added_note(study: Study, name: str, tested: list[tuple[str, str]]) -> str:
    """The sentence naming the tested rows that joined the study (``added``) after family ``name`` was
    declared: Holm's m of the family as declared did not count their hypotheses ("" for none)."""
    family = study.families.get(name)
    declared = family.declared if family is not None else None

    def row(label: str) -> str:  # a variant's row <row>+<variant> joined with its row
        head, _, tail = label.rpartition("+")
        return head if head and tail in study.variants else label

    late = {row(label): when for pair in tested for label in pair
            if (when := study.added.get(row(label))) is not None and (declared is None or when > declared)}
    if not late:
        return ""
    count = sum(1 for pair in tested if any(row(label) in late for label in pair))
    rows = ", ".join(f"`{label}` ({when:%Y-%m-%d %H:%M} UTC)" for label, when in sorted(late.items()))
    return (f"Added later, after the family was declared: {rows}; Holm's m counts their {count} "
            f"{'hypothesis' if count == 1 else 'hypotheses'} beside the {len(tested) - count} declared")


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
    output folder's of a study that keeps no archive; each test is computed here once. Returns the
    paths written, the comparison tables first, and the metric scores they used beside them
    (``scoring.table_metrics.scores_kept_in``)."""
    with scores_kept_in(folder / STORE) as scores:
        return _write_tables(study, load_runs(runs), folder, studies, scores)


def _write_tables(study: Study, runs: list[LoadedRun], folder: Path, studies: dict[str, Study] | None,
                  scores: MetricScores) -> list[Path]:
    check_declared_times(study)
    check_same_recipe(runs, varying_keys(study))
    studies = load_studies() if studies is None and study.other_studies() else studies
    others = other_studies_runs(study, studies)
    ranked = _ranking_inputs(study, studies, others)
    splits = runs[0].config.data.test_splits
    labels = {run.folder: label_of(run.folder) for run in runs}  # every table names a row by the study's label of it
    tables = []
    for testset in study.test_sets(splits):
        markdown, _ = write_comparison(runs, testset, folder / f"comparison_{testset}.md", metrics=study.metrics,
                                       allow_mixed_arithmetic=study.mixing, labels=labels, scores=scores)
        # the all-pairs letters over the trained rows: each evaluation variant is tested against its own row in its
        # family (with a row per variant, the pairs and the letters' groups grow past any reading)
        groups, _ = write_groups([run for run in runs if variant_of(run.folder) is None], testset, groups_path(markdown),
                                 study.mixing, labels)
        tables += [markdown, groups, *family_files(study, runs, testset, others, folder)]
        if ranked is not None:
            other, other_runs = ranked
            names = tuple(f"{s.name}, {r[0].config.train.max_steps} updates"
                          for s, r in ((other, other_runs), (study, runs)))
            ranking = ranking_files(folder / f"ranking_vs_{other.name}_{testset}.md", other_runs, runs, testset, names)
            tables += [ranking, ranking.with_suffix(".png")]
        tables += one_to_one_tables(study, runs, testset, folder, scores)
        tables += first_seed_tables(runs, testset, folder, study.metrics, study.mixing, labels, scores)
    if study.by_length:
        tables += by_length_table(runs, folder)
    if study.concat:
        tables += joined_files(study, runs, folder)
    if study.buckets:
        own, standings = {}, {}
        for family in study.own_families():  # each family's pairs with runs (a study part-way)
            tested, standing = rows_with_runs(study, family.name, splits, list(family.pairs), labels, runs, [])
            if tested:
                own[family.name], standings[family.name] = tuple(tested), standing
        tables += write_bucket_tables(runs, splits, study.buckets, own, folder, study.mixing, labels, standings)
    # a variant's decode is its run's training; a pretrained row was not trained by the suite
    trained = [run for run in runs if variant_of(run.folder) is None and not run.marian]
    tables += write_cost(trained, folder / "cost.md", splits[0])
    return tables
