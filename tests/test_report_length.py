"""The report's length section: the summary table of a length study beside its control
(``{{extrapolation STUDY CONTROL}}``), a declared family's counts (``STUDY.second.family.NAME.KEY``) and a claim
on an evaluation variant's row (``polar+pi > polar``), each against figures written here."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from experiment.config import load_config, to_dict
from reporting.claims import render_clause
from reporting.document import expand
from reporting.length_summary import length_summary
from reporting.values import value
from tests.conftest import evaluation_record
from utils.errors import UserError

FAMILY_HEADER = ["row", "baseline", "seeds", "difference", "low", "high", "p", "p_holm", "significant", "p_holm_se",
                 "borderline", "margin", "p_equivalence", "p_equivalence_holm", "equivalent", "p_equivalence_holm_se",
                 "equivalence_borderline"]
# row -> BLEU on test_long of seeds 1, 2 (its runs' records)
SEED_BLEU = {"sinusoidal": [14.0, 16.0], "rope": [11.0, 12.5], "fox": [20.0, 21.0]}
# row -> bucket -> (BLEU, interval low, high)
BUCKETS = {"sinusoidal": {"3-12": (95.0, 94.0, 96.0), "13-24": (38.0, 36.0, 40.0), "25-48": (8.0, 4.0, 12.0)},
           "rope": {"3-12": (96.0, 95.0, 97.0), "13-24": (39.0, 37.5, 40.5), "25-48": (6.0, 5.0, 7.0)},
           "fox": {"3-12": (97.0, 96.0, 98.0), "13-24": (47.0, 45.0, 49.0), "25-48": (13.0, 11.0, 15.0)}}


def write_csv(path: Path, rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)


def family(path: Path, lines: list[tuple[str, str, float, float, bool, bool]]) -> None:
    """(row, baseline, difference, p_holm, significant, borderline) lines of a family CSV."""
    write_csv(path, [FAMILY_HEADER, *[[row, base, "2", f"{d:+.2f}", f"{d - 1:+.2f}", f"{d + 1:+.2f}", "0.01",
                                        f"{p:.4f}", "yes" if sig else "no", "0.0100", "yes" if border else "no",
                                        "", "", "", "", "", ""] for row, base, d, p, sig, border in lines]])


def length_archive(root: Path) -> None:
    study, control = root / "report" / "synthetic-length", root / "report" / "synthetic-length-control"
    for label, bleus in SEED_BLEU.items():
        for seed, bleu in enumerate(bleus, start=1):
            for variant in ("", "+oracle"):
                run = study / (label + ("" if seed == 1 else f"-seed{seed}") + variant)
                (run / "eval" / "test_long").mkdir(parents=True)
                tree = to_dict(load_config(None, [f"model.positional.name={label}", f"seed={seed}"]))
                (run / "config.yaml").write_text(yaml.safe_dump(tree), encoding="utf-8")
                record = evaluation_record(bleu=bleu + (10.0 if variant else 0.0))
                (run / "eval" / "test_long" / "results.json").write_text(json.dumps(record), encoding="utf-8")
                (run / "manifest.json").write_text(json.dumps({"started": "2026-11-29T06:02:00+00:00"}), encoding="utf-8")
    header = ["scheme", "bucket", "sentences", "seeds", "bleu", "low", "high", "chrf", "length_ratio", "bleu_without_bp",
              "seed_bleus"]
    lines = [[label + variant, bucket, "100", "2", f"{bleu + (5 if variant else 0):.2f}", f"{low:.2f}", f"{high:.2f}",
              "50", "0.5", "60", "1;2"] for variant in ("", "+oracle") for bucket in ("3-12", "13-24", "25-48")
             for label, cells in BUCKETS.items() for bleu, low, high in [cells[bucket]]]
    write_csv(study / "buckets_test_test_long.csv", [header, *lines])
    family(study / "family_vs-sinusoidal_test_long.csv", [("rope", "sinusoidal", -3.25, 0.0300, True, False),
                                                         ("fox", "sinusoidal", 5.5, 0.0600, False, True)])
    family(study / "family_oracle-vs-plain_test_long.csv", [(f"{label}+oracle", label, 10.0, 0.0, True, False)
                                                            for label in SEED_BLEU])
    family(study / "family_gap-vs-sinusoidal_test_long.csv", [("rope", "sinusoidal", -40.0, 0.0, True, False),
                                                             ("fox", "sinusoidal", -50.0, 0.0, True, False)])
    columns = ["scheme", "seeds", "parameters", "valid loss", "BLEU", "BLEU 95% CI", "p vs sinusoidal", "p MC SE",
               "significant"]
    write_csv(control / "comparison_test_long.csv", [columns, ["fox", "3", "1", "1.0", "69.00 ± 1.00", "[67.00, 71.00]",
                                                               "0.000", "0.002", "yes"],
                                                     ["sinusoidal", "3", "1", "3.0", "0.10 ± 0.05", "[0.00, 0.20]", "—",
                                                      "—", "—"]])


def cells(table: str) -> dict[str, list[str]]:
    rows = [line.strip("| ").split(" | ") for line in table.splitlines()[2:]]
    return {row[0].split("`")[1]: row for row in rows}


def test_the_length_summary_shows_each_row_by_bucket_and_seed_beside_its_control(tmp_path):
    length_archive(tmp_path)
    table, caption = length_summary(tmp_path, "length", "control")
    rows = cells(table)
    assert list(rows) == ["sinusoidal", "rope", "fox"]  # by kind (absolute, rotary, 2024-25), variants left out
    assert rows["sinusoidal"][0] == "**absolute** `sinusoidal`" and rows["fox"][0] == "**2024–25** `fox`"
    # buckets; the mean and each seed on test_long; the control's mean; the family's difference; the oracle's
    assert rows["sinusoidal"][1:] == ["95.0", "38.0", "8.0", "15.0", "14.0 16.0", "0.1", "—", "+10.00"]
    assert rows["rope"][1:] == ["96.0", "39.0", "6.0", "11.8", "11.0 12.5", "—", "-3.25*", "+10.00"]
    assert rows["fox"][1:] == ["97.0", "47.0", "13.0", "20.5", "20.0 21.0", "69.0", "+5.50 (b)", "+10.00"]
    # bucket intervals within +-3: all but sinusoidal's 25-48 (+-4) -> 8 of 9, the widest +-4.0
    assert "8 of these 9 are, the widest ±4.0" in caption and "3 of 3 significant" in caption
    assert "Exploratory" in caption or "Confirmatory" in caption
    # the directive: the table, then its numbered caption
    shown = expand(tmp_path, "{{extrapolation length control}}\n", "x.md")
    assert shown.startswith(table + "\n\n**Table 1.** Every trained row of")
    # a row of the buckets table missing: one line naming the file
    path = tmp_path / "report" / "synthetic-length" / "buckets_test_test_long.csv"
    path.write_text("\n".join(line for line in path.read_text().splitlines() if not line.startswith("fox,")) + "\n")
    with pytest.raises(UserError, match=r"buckets_test_test_long\.csv has no row fox: remake the study's tables"):
        length_summary(tmp_path, "length", "control")


def test_a_familys_counts_and_a_variants_claim_are_read_off_its_tests(tmp_path):
    length_archive(tmp_path)
    expected = {"length.second.family.vs-sinusoidal.total": "2", "length.second.family.vs-sinusoidal.significant": "1",
                "length.second.family.vs-sinusoidal.below": "1", "length.second.family.vs-sinusoidal.above": "0",
                "length.second.family.vs-sinusoidal.below.rows": "`rope`",
                "length.second.family.gap-vs-sinusoidal.below": "2",
                "length.second.family.oracle-vs-plain.above.rows": "`sinusoidal+oracle`, `rope+oracle` and `fox+oracle`"}
    for name, text in expected.items():
        assert value(tmp_path, name) == text, name
    for bad, message in (("length.family.vs-sinusoidal.total", "holds the verdicts of one test set: name it"),
                         ("length.second.family.moon.total", "no family 'moon' archived on test_long"),
                         ("length.second.family.vs-sinusoidal.best", "unknown placeholder")):
        with pytest.raises(UserError, match=message):
            value(tmp_path, bad)
    clause, _ = render_clause(tmp_path, "claim length.second: sinusoidal+oracle > sinusoidal", lambda *_: 1)
    assert clause.startswith("sinusoidal decoded to the reference's length is above sinusoidal on the second test set")


def test_the_buckets_csv_is_read_as_its_writer_wrote_it(tmp_path):
    from scoring.buckets import BUCKET_HEADER
    from scoring.table_rows import buckets_from_csv

    line = ["fox", "13-24", "270", "5", "47.48", "45.10", "49.80", "60.00", "0.612", "55.00", "46.10;48.00"]
    [read] = buckets_from_csv("\n".join(",".join(row) for row in (BUCKET_HEADER, line)) + "\n")
    assert (read.label, read.bucket, read.bleu, read.low, read.high, read.length_ratio, read.seed_bleus) == (
        "fox", "13-24", 47.48, 45.10, 49.80, 0.612, (46.10, 48.00))
    with pytest.raises(UserError, match=r"^x\.csv: columns row, bleu; expected scheme, bucket"):
        buckets_from_csv("row,bleu\nfox,1\n", "x.csv")
    with pytest.raises(UserError, match=r"^x\.csv, line 2: "):
        buckets_from_csv(",".join(BUCKET_HEADER) + "\nfox,13-24,270,5,n/a\n", "x.csv")
