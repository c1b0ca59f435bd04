"""Declared families of hypotheses: the tests a study names before its runs (``families:`` in its
file, ``studies.catalog``), each family Holm-corrected within itself.

A hypothesis is one row against another (``row vs baseline``): the difference of their mean BLEU
over seeds, its 95% interval and a two-sided p, both from the paired bootstrap over seeds x
sentences (the same sentence resamples for every row; each row's seeds drawn with replacement,
Clark et al. 2011), then Holm's step-down correction over the family's hypotheses (Holm 1979). A
study's table command archives one file a family and test set, ``family_<name>_<test set>.md``
(+ CSV), which the report's claims read (``reporting.claims``).

A family that declares an equivalence ``margin`` m (BLEU) also tests each hypothesis for
equivalence: two one-sided tests (TOST; Schuirmann 1987) of "difference <= -m" and "difference >=
m" on the same bootstrap distribution, p the larger of the shares of resampled differences at or
beyond each bound (so p < 0.05 exactly when the 90% percentile interval lies inside (-m, m)),
Holm-corrected within the family. "Not shown to differ" (a p above the level) is not equivalence;
only this test supports "level with" or "as good as".

An interaction family (``interaction_table``) tests, for each (row, baseline), how the row's gap to
its baseline changes between two studies scored on the same test sentences: the difference in
differences (row − baseline here) − (row − baseline there), its interval and two-sided p from the
same paired bootstrap — one sentence resample for both studies, each study's seeds drawn apart —
and Holm within the family.

The all-pairs letters (``scoring.groups``) stay the overview; a family is smaller, so its
correction costs less power — which is why it must be declared before the results are seen. Its
caption says whether it was (``standing``: confirmatory, declared before the study's first run, or
exploratory).
"""
from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from scoring.arithmetic import Allowance, arithmetic_note
from scoring.groups import GROUP_SAMPLES, holm, holm_se, resample_rows, table_rows, two_sided_p
from scoring.loaded import LoadedRun
from scoring.metrics import BOOTSTRAP_SEED, SEED_ADJUSTMENT
from scoring.significance import SIGNIFICANCE, borderline, borderline_count, monte_carlo_note, monte_carlo_se
from scoring.table_rows import Hypothesis, family_csv, shown_family_cells
from scoring.table_text import markdown_table
from utils.errors import UserError
from utils.io import atomic_write_text


def equivalence_p(differences: np.ndarray, margin: float) -> float:
    """TOST p of resampled ``differences`` (S,) against the bounds -margin, +margin: the larger of the
    shares at or below -margin and at or above +margin."""
    return float(max(np.mean(differences <= -margin), np.mean(differences >= margin)))


DRAW_STRIDE = 1_000_003  # between the seeds of two draws of a bootstrap: beyond any row's offset (< 100,000 + 1)


def row_seed(label: str) -> int:
    """The seed of a row's resampling of its seeds: a function of its label alone, so a row is
    resampled alike in every family that holds it."""
    return BOOTSTRAP_SEED + 1 + zlib.crc32(label.encode("utf-8")) % 100_000


def _gaps(rows: dict, pairs: list[tuple[str, str]], samples: int, salt: str = "",
          draw: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Each pair's resampled gap row − baseline (P, samples) and observed gap (P,) on ``rows`` (label
    -> runs in seed order); ``salt`` names another study, whose seeds are drawn apart from this one's;
    ``draw`` > 0 is another draw of the whole bootstrap (sentences and seeds; 0: the tables' own).
    A pair naming a row the table lacks is a one-line error."""
    missing = next((label for pair in pairs for label in pair if label not in rows), None)
    if missing is not None:
        where = f" of {salt}" if salt else ""
        raise UserError(f"the family tests '{missing}', which has no runs in the table{where} (rows: {', '.join(rows)})")
    needed = {label: rows[label] for pair in pairs for label in pair}
    seeds = {label: row_seed(f"{label}@{salt}" if salt else label) + DRAW_STRIDE * draw for label in needed}
    resampled, means = resample_rows(needed, samples, seeds, BOOTSTRAP_SEED + DRAW_STRIDE * draw)
    return (np.stack([resampled[row] - resampled[baseline] for row, baseline in pairs]),
            np.array([means[row] - means[baseline] for row, baseline in pairs]))


def _hypotheses(pairs: list[tuple[str, str]], differences: np.ndarray, observed: np.ndarray,
                seeds: list[int], margin: float | None = None) -> list[Hypothesis]:
    """Each pair's interval and two-sided p from its resampled ``differences`` (P, samples), Holm over
    the pairs; with a ``margin``, each pair's TOST p, Holm over the pairs too. Each corrected p
    carries its Monte Carlo standard error, and a verdict within 3 of them of the level is borderline."""
    samples = differences.shape[1]
    raw = [two_sided_p(d, o) for d, o in zip(differences, observed)]
    corrected = holm(raw)
    corrected_se = holm_se(raw, [monte_carlo_se(p, samples, sides=2) for p in raw])
    tested = [Hypothesis(row, baseline, n, float(o), float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5)), p, q,
                         q < SIGNIFICANCE, se, borderline(q, se))
              for (row, baseline), n, d, o, p, q, se in zip(pairs, seeds, differences, observed, raw, corrected,
                                                            corrected_se)]
    if margin is None:
        return tested
    equal = [equivalence_p(d, margin) for d in differences]
    equal_holm = holm(equal)
    equal_se = holm_se(equal, [monte_carlo_se(p, samples) for p in equal])
    return [replace(t, margin=margin, p_equivalence=e, p_equivalence_holm=eh, equivalent=eh < SIGNIFICANCE,
                    p_equivalence_holm_se=se, equivalence_borderline=borderline(eh, se))
            for t, e, eh, se in zip(tested, equal, equal_holm, equal_se)]


def tested_family(rows: dict, pairs: list[tuple[str, str]], samples: int | None = None,
                  margin: float | None = None, draw: int = 0) -> list[Hypothesis]:
    """Each (row, baseline) of ``pairs`` tested on ``rows`` (label -> its runs in seed order) and the
    family's p-values Holm-corrected together (``samples`` sentence resamples, default
    ``GROUP_SAMPLES``; ``margin``: also tested for equivalence; ``draw``: another draw of the
    bootstrap, 0 the tables' own). A pair naming a row the table lacks is a one-line error."""
    differences, observed = _gaps(rows, pairs, samples or GROUP_SAMPLES, draw=draw)
    return _hypotheses(pairs, differences, observed,
                       [min(len(rows[row]), len(rows[baseline])) for row, baseline in pairs], margin)


def tested_interaction(rows: dict, other_rows: dict, other: str, pairs: list[tuple[str, str]],
                       samples: int | None = None, margin: float | None = None) -> list[Hypothesis]:
    """Each (row, baseline)'s difference in differences: its gap in ``rows`` minus its gap in
    ``other_rows`` (study ``other``), both resampled on the same sentences (paired; each study's
    seeds drawn apart), Holm over the family. Studies scored on other references are a one-line error."""
    here, there = next(iter(rows.values()))[0], next(iter(other_rows.values()))[0]
    if here.refs != there.refs:
        raise UserError(f"an interaction with {other} needs the same test sentences: {there.run_dir} was scored on "
                        f"other references than {here.run_dir}")
    gaps, observed = _gaps(rows, pairs, samples or GROUP_SAMPLES)
    other_gaps, other_observed = _gaps(other_rows, pairs, samples or GROUP_SAMPLES, salt=other)
    seeds = [min(len(r[label]) for r in (rows, other_rows) for label in pair) for pair in pairs]
    return _hypotheses(pairs, gaps - other_gaps, observed - other_observed, seeds, margin)


def family_markdown(tests: list[Hypothesis], where: str, name: str, arithmetic: str, standing: str = "",
                    interaction: str | None = None) -> tuple[str, str]:
    """Markdown and CSV of a family's tested hypotheses (``where``: the sentences they were tested on;
    ``standing``: when it was declared; ``interaction``: the other study of a difference in differences)."""
    margin = tests[0].margin if tests else None
    shown = ["row", "baseline", "seeds", "difference", "95% CI", "p", "p (Holm) ± MC SE", "significant"]
    shown += [] if margin is None else [f"TOST ±{margin:.2f} p (Holm) ± MC SE", "equivalent"]
    md = markdown_table(shown, (_shown_cells(t) for t in tests))
    difference = ("mean BLEU of the row minus the baseline's" if interaction is None else
                  f"the row's gap to the baseline (mean BLEU) here minus its gap in `{interaction}` (a difference in "
                  f"differences; the same sentence resamples for both studies, each study's seeds drawn apart)")
    equivalence = "" if margin is None else (
        f" Equivalence: two one-sided tests against ±{margin:.2f} BLEU, the margin declared with the family (p: the "
        f"larger share of resampled differences at or beyond a bound), Holm-corrected within the family; equivalent "
        f"at corrected p < {SIGNIFICANCE}: {sum(t.equivalent for t in tests)} of {len(tests)}"
        f"{borderline_count([t.equivalence_borderline for t in tests])}.")
    md += ["", f"{where[:1].upper()}{where[1:]}, family `{name}`: {len(tests)} hypotheses declared in the study "
               f"file (`families`){f'. {standing}' if standing else ''}. Difference: {difference}, with its 95% "
               f"interval; p: two-sided paired bootstrap over seeds x sentences ({GROUP_SAMPLES:,} samples; "
               f"{SEED_ADJUSTMENT}); p (Holm): "
               f"corrected within the family (Holm 1979); significant at corrected p < {SIGNIFICANCE}: "
               f"{sum(t.significant for t in tests)} of {len(tests)}"
               f"{borderline_count([t.borderline for t in tests])}.{equivalence} {monte_carlo_note('MC SE', corrected=True)} "
               f"{arithmetic}"]
    return "\n".join(md) + "\n", family_csv(tests)


def _shown_cells(test: Hypothesis) -> list[str]:
    """A hypothesis's cells as the Markdown table shows them (``shown_family_cells``), in its columns' order."""
    c = shown_family_cells(test)
    cells = [c["row"], c["baseline"], c["seeds"], c["difference"], f"[{c['low']}, {c['high']}]", c["p"], c["p_holm"],
             c["significant"]]
    return cells + ([c["p_equivalence_holm"], c["equivalent"]] if test.margin is not None else [])


def family_table(run_dirs: Sequence[LoadedRun | Path], testset: str, name: str, pairs: list[tuple[str, str]],
                 allow_mixed_arithmetic: Allowance = False, labels: dict[Path, str] | None = None,
                 standing: str = "", margin: float | None = None) -> tuple[str, str]:
    """Markdown and CSV of family ``name`` on ``testset``: a line per hypothesis, in declaration order.
    Rows are named as the table names them (the scheme, and the settings that set it apart), or
    by ``labels`` (run folder -> label, e.g. a study's row labels: its runs of one label are a row)."""
    rows = table_rows(run_dirs, testset, labels)
    arithmetic = arithmetic_note({label: [r.run for r in runs] for label, runs in rows.items()},
                                 allow_mixed_arithmetic)
    return family_markdown(tested_family(rows, pairs, margin=margin), f"test set `{testset}`", name, arithmetic,
                           standing)


def interaction_table(run_dirs: Sequence[LoadedRun | Path], other_dirs: Sequence[LoadedRun | Path], other: str, testset: str, name: str,
                      pairs: list[tuple[str, str]], allow_mixed_arithmetic: Allowance = False,
                      labels: dict[Path, str] | None = None, standing: str = "",
                      margin: float | None = None) -> tuple[str, str]:
    """Markdown and CSV of interaction family ``name`` on ``testset``: each pair's difference in
    differences between the runs ``run_dirs`` and study ``other``'s ``other_dirs`` (``labels`` names
    the runs of both). Each study holds one arithmetic unless allowed; the caption names both."""
    rows, other_rows = (table_rows(dirs, testset, labels) for dirs in (run_dirs, other_dirs))
    notes = [arithmetic_note({label: [r.run for r in runs] for label, runs in table.items()}, allow_mixed_arithmetic)
             for table in (rows, other_rows)]
    arithmetic = notes[0] if notes[0] == notes[1] else f"Here: {notes[0]} In `{other}`: {notes[1]}"
    return family_markdown(tested_interaction(rows, other_rows, other, pairs, margin=margin), f"test set `{testset}`",
                           name, arithmetic, standing, other)


def family_path(folder: Path, name: str, testset: str) -> Path:
    """Where a family's table on ``testset`` is archived (Markdown; the CSV beside it)."""
    return Path(folder) / f"family_{name}_{testset}.md"


def write_family(run_dirs: Sequence[LoadedRun | Path], testset: str, folder: Path, name: str, pairs: list[tuple[str, str]],
                 allow_mixed_arithmetic: Allowance = False, labels: dict[Path, str] | None = None,
                 standing: str = "", interaction: tuple[str, Sequence[LoadedRun | Path]] | None = None,
                 margin: float | None = None) -> tuple[Path, Path]:
    """``family_table`` (or with ``interaction``, the other study's name and runs, ``interaction_table``)
    written under ``folder`` (``family_path``) with its CSV; returns both paths."""
    if interaction is None:
        markdown, table_csv = family_table(run_dirs, testset, name, pairs, allow_mixed_arithmetic, labels, standing,
                                           margin)
    else:
        markdown, table_csv = interaction_table(run_dirs, interaction[1], interaction[0], testset, name, pairs,
                                                allow_mixed_arithmetic, labels, standing, margin)
    out = family_path(folder, name, testset)
    atomic_write_text(out, markdown)
    atomic_write_text(out.with_suffix(".csv"), table_csv)
    return out, out.with_suffix(".csv")
