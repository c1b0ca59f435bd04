"""Declared families of hypotheses: the tests a study names before its runs (``families:`` in its
file, ``studies.catalog``), each family Holm-corrected within itself.

A hypothesis is one row against another (``row vs baseline``): the difference of their mean BLEU
over seeds, its 95% interval and a two-sided p, both from the paired bootstrap over seeds x
sentences (the same sentence resamples for every row; each row's seeds drawn with replacement,
Clark et al. 2011), then Holm's step-down correction over the family's hypotheses (Holm 1979). A
study's table command archives one file a family and test set, ``family_<name>_<test set>.md``
(+ CSV), which the report's claims read (``reporting.claims``).

The all-pairs letters (``scoring.groups``) stay the overview; a family is smaller, so its
correction costs less power — which is why it must be declared before the results are seen.
"""
from __future__ import annotations

import csv
import io
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scoring.arithmetic import arithmetic_note
from scoring.groups import GROUP_SAMPLES, holm, resample_rows, table_rows, two_sided_p
from scoring.metrics import BOOTSTRAP_SEED
from scoring.significance import SIGNIFICANCE
from utils.errors import UserError
from utils.io import atomic_write_text

HEADER = ["row", "baseline", "seeds", "difference", "low", "high", "p", "p_holm", "significant"]


@dataclass(frozen=True)
class Hypothesis:
    row: str
    baseline: str
    seeds: int  # the row's seeds (the fewer of the two rows')
    difference: float  # mean BLEU of row minus baseline's
    low: float  # 95% bootstrap interval of the difference
    high: float
    p: float  # two-sided, uncorrected
    p_holm: float  # Holm-corrected within the family

    @property
    def significant(self) -> bool:
        return self.p_holm < SIGNIFICANCE


def row_seed(label: str) -> int:
    """The seed of a row's resampling of its seeds: a function of its label alone, so a row is
    resampled alike in every family that holds it."""
    return BOOTSTRAP_SEED + 1 + zlib.crc32(label.encode("utf-8")) % 100_000


def tested_family(rows: dict, pairs: list[tuple[str, str]], samples: int | None = None) -> list[Hypothesis]:
    """Each (row, baseline) of ``pairs`` tested on ``rows`` (label -> its runs in seed order) and the
    family's p-values Holm-corrected together (``samples`` sentence resamples, default
    ``GROUP_SAMPLES``). A pair naming a row the table lacks is a one-line error."""
    missing = next((label for pair in pairs for label in pair if label not in rows), None)
    if missing is not None:
        raise UserError(f"the family tests '{missing}', which has no runs in the table (rows: {', '.join(rows)})")
    needed = {label: rows[label] for pair in pairs for label in pair}
    resampled, means = resample_rows(needed, samples or GROUP_SAMPLES, {label: row_seed(label) for label in needed})
    tests = []
    for row, baseline in pairs:
        differences = resampled[row] - resampled[baseline]
        observed = means[row] - means[baseline]
        tests.append((row, baseline, observed, float(np.percentile(differences, 2.5)),
                      float(np.percentile(differences, 97.5)), two_sided_p(differences, observed)))
    corrected = holm([t[5] for t in tests])
    return [Hypothesis(row, baseline, min(len(rows[row]), len(rows[baseline])), d, low, high, p, q)
            for (row, baseline, d, low, high, p), q in zip(tests, corrected)]


def relabel(rows: dict[str, list], labels: dict[Path, str]) -> dict[str, list]:
    """A table's rows named by ``labels`` (run folder -> label): the runs of one label form a row."""
    relabelled: dict[str, list] = {}
    for runs in rows.values():
        for run in runs:
            relabelled.setdefault(labels[run.run_dir], []).append(run)
    return relabelled


def family_markdown(tests: list[Hypothesis], where: str, name: str, arithmetic: str) -> tuple[str, str]:
    """Markdown and CSV of a family's tested hypotheses (``where``: the sentences they were tested on)."""
    cells = [[t.row, t.baseline, str(t.seeds), f"{t.difference:+.2f}", f"{t.low:+.2f}", f"{t.high:+.2f}",
              f"{t.p:.4f}", f"{t.p_holm:.4f}", "yes" if t.significant else "no"] for t in tests]
    shown = ["row", "baseline", "seeds", "difference", "95% CI", "p", "p (Holm)", "significant"]
    md = ["| " + " | ".join(shown) + " |", "|" + "|".join(" --- " for _ in shown) + "|"]
    md += [f"| {c[0]} | {c[1]} | {c[2]} | {c[3]} | [{c[4]}, {c[5]}] | {c[6]} | {c[7]} | {c[8]} |" for c in cells]
    md += ["", f"{where[:1].upper()}{where[1:]}, family `{name}`: {len(tests)} hypotheses declared in the study "
               f"file (`families`). Difference: mean BLEU of the row minus the baseline's, with its 95% interval; p: "
               f"two-sided paired bootstrap over seeds x sentences ({GROUP_SAMPLES:,} samples); p (Holm): corrected "
               f"within the family (Holm 1979); significant at corrected p < {SIGNIFICANCE}: "
               f"{sum(t.significant for t in tests)} of {len(tests)}. {arithmetic}"]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(HEADER)
    writer.writerows(cells)
    return "\n".join(md) + "\n", buffer.getvalue()


def family_table(run_dirs: list[Path], testset: str, name: str, pairs: list[tuple[str, str]],
                 allow_mixed_arithmetic: bool = False, labels: dict[Path, str] | None = None) -> tuple[str, str]:
    """Markdown and CSV of family ``name`` on ``testset``: a line per hypothesis, in declaration order.
    Rows are named as the table names them (the scheme, and the settings that set it apart), or
    by ``labels`` (run folder -> label, e.g. a study's row labels: its runs of one label are a row)."""
    rows = table_rows(run_dirs, testset)
    if labels is not None:
        rows = relabel(rows, labels)
    arithmetic = arithmetic_note({label: [r.run_dir for r in runs] for label, runs in rows.items()},
                                 allow_mixed_arithmetic)
    return family_markdown(tested_family(rows, pairs), f"test set `{testset}`", name, arithmetic)


def family_path(folder: Path, name: str, testset: str) -> Path:
    """Where a family's table on ``testset`` is archived (Markdown; the CSV beside it)."""
    return Path(folder) / f"family_{name}_{testset}.md"


def write_family(run_dirs: list[Path], testset: str, folder: Path, name: str, pairs: list[tuple[str, str]],
                 allow_mixed_arithmetic: bool = False, labels: dict[Path, str] | None = None) -> tuple[Path, Path]:
    """``family_table`` written under ``folder`` (``family_path``) with its CSV; returns both paths."""
    markdown, table_csv = family_table(run_dirs, testset, name, pairs, allow_mixed_arithmetic, labels)
    out = family_path(folder, name, testset)
    atomic_write_text(out, markdown)
    atomic_write_text(out.with_suffix(".csv"), table_csv)
    return out, out.with_suffix(".csv")
