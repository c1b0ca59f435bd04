"""Every kind of table a study's archive holds, each a function of the study loaded once
(``LoadedStudy``) that returns its files by name — text, or a picture to draw — and writes nothing:
``studies.tables`` writes what they return in one pass. Two registries, in the order the files are made:
``TESTSET_TABLES`` (each test set in turn: the comparison table, its significance groups, the declared
families, the ranking against another study, the one-to-one tables, the first seed's table and order)
and ``STUDY_TABLES`` (once: BLEU by length, joined test sentences, source-length buckets, the cost).
A kind a study does not ask for returns nothing. Adding one: a function here and its line in a registry.
"""
from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from analysis.pictures import by_group_size, by_position, two_orders
from analysis.results import length_study
from models.positional import KINDS, scheme_kind
from scoring.buckets import bucket_tables
from scoring.compare import compare
from scoring.cost import cost_table
from scoring.families import family_table, interaction_table
from scoring.groups import significance_groups
from scoring.joined import joined_csv, joined_points
from scoring.loaded import LoadedRun
from scoring.positions import position_points, positions_csv
from scoring.ranking import compare_rankings, scheme_bleu
from scoring.significance import BASELINE
from scoring.table_metrics import MetricScores
from studies.catalog import Study
from studies.runs import label_of, variant_of
from studies.standing import rows_with_runs

Picture = Callable[[Path], Path]  # draws itself at the path it is given
Files = dict[str, str | Picture]  # a file's name in the study's folder -> its text or picture


@dataclass(frozen=True, kw_only=True)
class LoadedStudy:
    """A study and everything its tables read, loaded once: its runs, the runs of each other study its
    tables name (``Study.other_studies``; [] where that study has none archived), the study its order is
    ranked against with that study's runs (or None), the metric scores the tables share
    (``scoring.table_metrics``), and each run's row label (run folder -> the study's label of it: every
    table names a row so)."""

    study: Study
    runs: list[LoadedRun]
    others: dict[str, list[LoadedRun]]
    ranked: tuple[Study, list[LoadedRun]] | None
    scores: MetricScores
    labels: dict[Path, str]

    @property
    def splits(self) -> list[str]:
        return self.runs[0].config.data.test_splits

    def say(self, line: str) -> None:
        print(f"[{self.study.name}] {line}", flush=True)


def _pair(stem: str, tables: tuple[str, str]) -> Files:
    """A table's Markdown and its CSV twin."""
    return {f"{stem}.md": tables[0], f"{stem}.csv": tables[1]}


def comparison(s: LoadedStudy, testset: str) -> Files:
    """``comparison_<test set>``: every row, seeds folded (``scoring.compare``)."""
    return _pair(f"comparison_{testset}", compare(s.runs, testset, metrics=s.study.metrics,
                                                   allow_mixed_arithmetic=s.study.mixing, labels=s.labels,
                                                   scores=s.scores))


def groups(s: LoadedStudy, testset: str) -> Files:
    """``groups_<test set>``: the all-pairs letters over the trained rows — each evaluation variant is
    tested against its own row in its family (with a row per variant, the pairs and the letters' groups
    grow past any reading)."""
    trained = [run for run in s.runs if variant_of(run.folder) is None]
    return _pair(f"groups_{testset}", significance_groups(trained, testset, s.study.mixing, s.labels))


def families(s: LoadedStudy, testset: str) -> Files:
    """``family_<name>_<test set>`` of each declared family; an interaction family's needs the other
    study's archived runs (skipped with one line while it has none), as does a family none of whose
    pairs has runs yet (a study part-way)."""
    made: Files = {}
    for name, family in s.study.families.items():
        other_name, other_runs = family.interaction, []
        if other_name is not None:
            other_runs = s.others[other_name]
            if not other_runs:
                s.say(f"skipped family '{name}' on {testset}: no archived runs of {other_name}")
                continue
        labels = {**s.labels, **{run.folder: label_of(run.folder) for run in other_runs}}
        tested, standing = rows_with_runs(s.study, name, [testset], list(family.pairs), labels, s.runs, other_runs)
        if not tested:
            s.say(f"skipped family '{name}' on {testset}: none of its pairs has runs yet")
            continue
        made |= _pair(f"family_{name}_{testset}", family_table(
            s.runs, testset, name, tested, s.study.mixing, labels, standing, family.margin) if other_name is None
            else interaction_table(s.runs, other_runs, other_name, testset, name, tested, s.study.mixing, labels,
                                   standing, family.margin))
    return made


def ranking(s: LoadedStudy, testset: str) -> Files:
    """``ranking_vs_<other>_<test set>``: the two studies' orders of their schemes (Kendall's tau-b) and
    beside it the picture of each scheme's BLEU in both."""
    if s.ranked is None:
        return {}
    other, other_runs = s.ranked
    names = tuple(f"{study.name}, {runs[0].config.train.max_steps} updates"
                  for study, runs in ((other, other_runs), (s.study, s.runs)))
    first, second = scheme_bleu(other_runs, testset), scheme_bleu(s.runs, testset)
    stem = f"ranking_vs_{other.name}_{testset}"
    return {f"{stem}.md": compare_rankings(first, second, names),
            f"{stem}.png": functools.partial(two_orders, first, second, names,
                                             f"Each scheme's BLEU in both studies ({testset})")}


def one_to_one(s: LoadedStudy, testset: str) -> Files:
    """The study's ``compare`` tables: for each baseline row, that row and the rows declared against it
    (``all``: every row), ``comparison_vs_<baseline>_<test set>``."""
    made: Files = {}
    for baseline, members in s.study.compare.items():
        wanted = None if members == "all" else {baseline, *members}
        chosen = [run for run in s.runs if wanted is None or s.labels[run.folder] in wanted]
        base = next((run for run in chosen if s.labels[run.folder] == baseline), None)
        if base is None:
            s.say(f"skipped comparison_vs_{baseline}_{testset}: no run of '{baseline}'")
            continue
        made |= _pair(f"comparison_vs_{baseline}_{testset}", compare(
            chosen, testset, base, s.study.metrics, s.study.mixing, {run.folder: s.labels[run.folder] for run in chosen},
            s.scores))
    return made


def first_seed(s: LoadedStudy, testset: str) -> Files:
    """What the table said with its first seed alone, beside what it says with every seed: for runs with
    several seeds of some scheme, ``comparison_seed<S>_<test set>`` of the runs of the first seed ``S``,
    and ``ranking_seed<S>_vs_all_<test set>.md``, that order beside the order of the means over all seeds
    (Kendall's tau-b, each gap to sinusoidal and how it moved). Nothing when every scheme has one seed or
    the first seed lacks sinusoidal or a second scheme."""
    first = min(run.config.seed for run in s.runs)
    first_runs = [run for run in s.runs if run.config.seed == first]
    first_bleu = scheme_bleu(first_runs, testset)
    if len(first_runs) == len(s.runs) or len(first_bleu) < 2 or BASELINE not in first_bleu:
        return {}
    table = compare(first_runs, testset, metrics=s.study.metrics, allow_mixed_arithmetic=s.study.mixing,
                    labels=s.labels, scores=s.scores)
    return _pair(f"comparison_seed{first}_{testset}", table) | {
        f"ranking_seed{first}_vs_all_{testset}.md": compare_rankings(
            first_bleu, scheme_bleu(s.runs, testset), (f"seed {first} alone", "mean over all seeds"))}


def by_length(s: LoadedStudy) -> Files:
    """``length_study``'s table, Markdown and CSV, rows named by their study labels (its picture is
    drawn, then left: a study's pictures are in its output folder)."""
    if not s.study.by_length:
        return {}
    with tempfile.TemporaryDirectory() as scratch:
        folders = [run.folder for run in s.runs]
        made = [path for path in length_study(folders, Path(scratch), labels={f: label_of(f) for f in folders})
                if path.suffix in (".md", ".csv")]
        # read as bytes: read_text would turn the CSV's CRLF line ends into LF
        texts = {table.name: table.read_bytes().decode("utf-8") for table in made}
        shutil.rmtree(scratch, ignore_errors=True)
    return texts


def joined(s: LoadedStudy) -> Files:
    """Per test split, BLEU and length ratio against k (1 and the study's ``concat``): ``joined_<split>.csv``
    and its figure beside it, a panel per kind of scheme; and BLEU of each position inside the joined
    inputs (``positions_<split>.csv`` and its figure)."""
    if not s.study.concat:
        return {}
    made: Files = {}
    kinds = {s.labels[run.folder]: scheme_kind(run.config.model.positional.name) for run in s.runs}
    for split in s.splits:
        points = joined_points(s.runs, split, s.study.concat, s.labels)
        made[f"joined_{split}.csv"] = joined_csv(points)
        made[f"joined_{split}.png"] = functools.partial(
            by_group_size, points, kinds, KINDS, f"{s.study.name}: {split}, k consecutive sentences as one input")
        positions = position_points(s.runs, split, s.study.concat, s.labels)
        made[f"positions_{split}.csv"] = positions_csv(positions)
        made[f"positions_{split}.png"] = functools.partial(
            by_position, positions, kinds, KINDS,
            f"{s.study.name}: {split}, BLEU of each sentence inside k joined (re-segmented onto its references)")
    return made


def buckets(s: LoadedStudy) -> Files:
    """The source-length buckets' tables and each own family's within each bucket (``scoring.buckets``)."""
    if not s.study.buckets:
        return {}
    own, standings = {}, {}
    for family in s.study.own_families():  # each family's pairs with runs (a study part-way)
        tested, standing = rows_with_runs(s.study, family.name, s.splits, list(family.pairs), s.labels, s.runs, [])
        if tested:
            own[family.name], standings[family.name] = tuple(tested), standing
    return bucket_tables(s.runs, s.splits, s.study.buckets, own, s.study.mixing, s.labels, standings)


def cost(s: LoadedStudy) -> Files:
    """``cost``: the training cost of the runs the suite trained (a variant's decode is its run's
    training; a pretrained row was not trained by the suite)."""
    trained = [run for run in s.runs if variant_of(run.folder) is None and not run.marian]
    return _pair("cost", cost_table(trained, s.splits[0]))


TESTSET_TABLES: dict[str, Callable[[LoadedStudy, str], Files]] = {
    "comparison": comparison, "groups": groups, "families": families, "ranking": ranking,
    "one_to_one": one_to_one, "first_seed": first_seed}
STUDY_TABLES: dict[str, Callable[[LoadedStudy], Files]] = {
    "by_length": by_length, "joined": joined, "buckets": buckets, "cost": cost}


def study_files(s: LoadedStudy) -> Files:
    """Every file of the study's tables, by name, in the order they are made: each test set's tables
    (``TESTSET_TABLES``) in turn, then the study's own (``STUDY_TABLES``). Nothing is written here."""
    made: Files = {}
    for testset in s.study.test_sets(s.splits):
        for kind in TESTSET_TABLES.values():
            made |= kind(s, testset)
    for kind in STUDY_TABLES.values():
        made |= kind(s)
    return made
