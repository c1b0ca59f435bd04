"""Groups of table rows whose differences are not significant, as statistics papers mark them: a
letter per group, every pair of rows tested.

Every pair of rows gets a two-sided paired bootstrap p over seeds x sentences (each row's mean
BLEU over its seeds resampled once, all rows on the same sentence samples; ``scoring.metrics``),
the p-values of all pairs are corrected together by Holm's step-down method (Holm 1979), and the
rows are covered by groups that hold no significantly different pair — the compact letter display
built by insertion and absorption (Piepho 2004): rows that share a letter are not shown to differ.
Letters run from the best row's group (``a``) down. A table command computes them once and
archives them beside the comparison table (``groups_<test set>.md`` / ``.csv``), so a reading of
the table can rest on them without re-running a bootstrap.
"""
from __future__ import annotations

import itertools
import statistics
import string
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from scoring.arithmetic import Allowance, arithmetic_note
from scoring.evaluated import EvaluatedRun, evaluated_rows, group_labels, replicates_note, row_keys
from scoring.loaded import LoadedRun, as_loaded
from scoring.metrics import (
    BOOTSTRAP_SEED,
    SEED_ADJUSTMENT,
    Draws,
    one_sided_p,
    seed_resampled_bleu,
)
from scoring.recipe import check_same_decoding
from scoring.significance import SIGNIFICANCE, borderline, borderline_count, monte_carlo_note, monte_carlo_se
from scoring.table_rows import GroupRow, GroupsTable, PairTest
from utils.errors import UserError
from utils.io import atomic_write_text

GROUP_SAMPLES = 10_000  # more than a table's 1,000: Holm divides the level by up to the number of pairs


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the k-th smallest of m is multiplied
    by m − k + 1, made non-decreasing along that order and capped at 1."""
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def holm_se(p_values: list[float], errors: list[float]) -> list[float]:
    """The Monte Carlo standard error of each Holm-adjusted p (``holm``), in the order given: the
    error of the raw p that sets the adjusted one (the running maximum's), times its multiplier
    m − k + 1. Exact for the setting term; the errors of the other terms are ignored."""
    m = len(p_values)
    errs = [0.0] * m
    running, running_err = 0.0, 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        term = min(1.0, (m - rank) * p_values[i])
        if term >= running:
            running, running_err = term, (m - rank) * errors[i]
        errs[i] = running_err
    return errs


def letters(order: list[str], different: set[frozenset[str]]) -> dict[str, str]:
    """Compact letter display of ``order`` (rows, best first) given the pairs that differ: each group
    is a maximal set of rows with no differing pair among them, found by insertion and absorption
    (Piepho 2004); groups are lettered by their best row, and a row's letters are those of its groups.
    After each pair the groups are the maximal sets holding none of the pairs seen so far, so the
    order the pairs come in does not change the result."""
    groups = [frozenset(order)]
    for a, b in (tuple(pair) for pair in different):
        # a group without both rows gives itself (minus the absent one) and a subset, absorbed below
        split = [part for group in groups for part in (group - {a}, group - {b})]
        unique = list(dict.fromkeys(split))
        groups = [g for g in unique if g and not any(g < other for other in unique)]
    rank = {row: i for i, row in enumerate(order)}
    groups.sort(key=lambda g: sorted(rank[row] for row in g))
    return {row: "".join(group_letter(i) for i, g in enumerate(groups) if row in g) for row in order}


def group_letter(i: int) -> str:
    """The i-th group's label: a .. z, then A .. Z (a row's labels are read letter by letter)."""
    alphabet = string.ascii_lowercase + string.ascii_uppercase
    if i >= len(alphabet):
        raise UserError(f"{i + 1} significance groups: more than the {len(alphabet)} letters a-z, A-Z")
    return alphabet[i]


def resample_rows(rows: dict[str, list[EvaluatedRun]], samples: int, seeds: dict[str, int],
                  sentence_seed: int = BOOTSTRAP_SEED) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Each row's mean BLEU over its seeds on the same ``samples`` sentence resamples (paired, drawn
    with ``sentence_seed``), its seeds drawn with the generator seeded ``seeds[label]`` -> (label ->
    (samples,), label -> observed mean BLEU). Rows scored on other references than the first are a
    one-line error."""
    refs = next(iter(rows.values()))[0].refs
    draws = Draws(len(refs), samples, sentence_seed)
    resampled, means = {}, {}
    for label, runs in rows.items():
        stray = next((r for r in runs if r.refs != refs), None)
        if stray is not None:
            raise UserError(f"{stray.run_dir} was scored on other references than the table's first run")
        resampled[label] = seed_resampled_bleu([r.scored for r in runs], draws, seeds[label])
        means[label] = statistics.mean(r.scored.bleu.value for r in runs)
    return resampled, means


def two_sided_p(differences: np.ndarray, observed: float) -> float:
    """Two-sided bootstrap p of an observed difference: twice the share of resampled differences
    (S,) without its sign, capped at 1."""
    return min(1.0, 2 * one_sided_p(differences, observed))


def all_pairs(rows: dict[str, list[EvaluatedRun]], samples: int = GROUP_SAMPLES) -> list[PairTest]:
    """Every pair of ``rows`` (label -> its runs, one per seed) tested and Holm-corrected together, each
    corrected p with its Monte Carlo standard error and the verdict marked where another draw may turn it."""
    seeds = {label: BOOTSTRAP_SEED + 1 + offset for offset, label in enumerate(sorted(rows))}
    resampled, means = resample_rows(dict(sorted(rows.items())), samples, seeds)
    pairs = list(itertools.combinations(sorted(rows), 2))
    raw = [two_sided_p(resampled[a] - resampled[b], means[a] - means[b]) for a, b in pairs]
    errors = holm_se(raw, [monte_carlo_se(p, samples, sides=2) for p in raw])
    return [PairTest(a, b, means[a] - means[b], p, q, q < SIGNIFICANCE, e, borderline(q, e))
            for (a, b), p, q, e in zip(pairs, raw, holm(raw), errors)]


def table_rows(run_dirs: Sequence[LoadedRun | Path], testset: str,
               labels: dict[Path, str] | None = None) -> dict[str, list[EvaluatedRun]]:
    """The runs evaluated on ``testset`` as a table's rows: label -> its runs in seed order (runs
    that differ only in seed form a row, replicates do not: ``row_keys``; with ``labels``, run folder ->
    label, the runs of one label); runs decoded differently are a one-line error."""
    runs = evaluated_rows(as_loaded(run_dirs), testset)
    check_same_decoding(runs, testset)
    by_group: dict[str, list[EvaluatedRun]] = {}
    for key, run in zip(row_keys([(r.group, r.seed, r.run_dir) for r in runs], labels), runs):
        by_group.setdefault(key, []).append(run)
    names = group_labels({key: (members[0].row_scheme, members[0].run) for key, members in by_group.items()},
                         labels)
    return {names[key]: sorted(members, key=lambda r: r.seed) for key, members in by_group.items()}


def significance_groups(run_dirs: Sequence[LoadedRun | Path], testset: str, allow_mixed_arithmetic: Allowance = False,
                        labels: dict[Path, str] | None = None) -> tuple[str, str]:
    """Markdown and CSV of the rows' letters (rows as in the comparison table: runs that differ only
    in seed folded; ``labels`` as in ``table_rows``), best mean BLEU first, and every pair's test below
    the letters in the CSV; one arithmetic unless ``allow_mixed_arithmetic`` (``scoring.arithmetic``)."""
    rows = table_rows(run_dirs, testset, labels)
    arithmetic = arithmetic_note({label: [r.run for r in members] for label, members in rows.items()},
                                 allow_mixed_arithmetic)
    tests = all_pairs(rows)
    mean = {label: statistics.mean(r.record.bleu for r in members) for label, members in rows.items()}
    order = sorted(rows, key=lambda label: (-mean[label], label))
    marks = letters(order, {frozenset((t.a, t.b)) for t in tests if t.significant})
    m = len(tests)
    table = GroupsTable([GroupRow(label, len(rows[label]), mean[label], marks[label]) for label in order],
                        sorted(tests, key=lambda t: (order.index(t.a), order.index(t.b))))
    md = table.markdown()
    md += ["", f"Test set `{testset}`. Rows that share a letter are not shown to differ: every pair of the {len(order)} "
               f"rows was tested ({m} pairs) by a two-sided paired bootstrap over seeds x sentences "
               f"({GROUP_SAMPLES:,} samples; {SEED_ADJUSTMENT}), the p-values Holm-corrected together, a difference called significant "
               f"at corrected p < {SIGNIFICANCE}; {sum(t.significant for t in tests)} of the {m} pairs are"
               f"{borderline_count([t.borderline for t in tests])}; every pair's p, corrected p and "
               f"its error are in the CSV. "
               f"{monte_carlo_note('p_holm_se', corrected=True)} "
               f"Letters by insertion and absorption (Piepho 2004), from the best row's group down."
               f"{replicates_note(members[0].group for members in rows.values())} {arithmetic}"]
    return "\n".join(md) + "\n", table.to_csv()


def groups_path(table: Path) -> Path:
    """Where the groups of the comparison table ``table`` (``…/comparison_<x>.md``) are archived."""
    table = Path(table)
    stem = table.stem[len("comparison_"):] if table.stem.startswith("comparison_") else table.stem
    return table.with_name(f"groups_{stem}.md")


def write_groups(run_dirs: Sequence[LoadedRun | Path], testset: str, out: Path, allow_mixed_arithmetic: Allowance = False,
                 labels: dict[Path, str] | None = None) -> tuple[Path, Path]:
    """``significance_groups`` written to ``out`` (Markdown) and ``out`` with suffix .csv."""
    markdown, table_csv = significance_groups(run_dirs, testset, allow_mixed_arithmetic, labels)
    out = Path(out)
    atomic_write_text(out, markdown)
    atomic_write_text(out.with_suffix(".csv"), table_csv)
    return out, out.with_suffix(".csv")
