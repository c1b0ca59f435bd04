"""The table contract: each archived table kind written from typed rows and read back into the same
rows, its columns as the archives have them, a verdict read back as written, and every archive of
the checkout read and rewritten byte for byte."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from scoring.table_rows import (
    ComparisonRow,
    ComparisonTable,
    DeviceCost,
    GroupRow,
    GroupsTable,
    Hypothesis,
    LengthRow,
    LengthTable,
    MeanStd,
    PairTest,
    SchemeCost,
    cost_csv,
    cost_from_csv,
    cost_markdown,
    family_csv,
    family_from_csv,
)
from utils.errors import UserError

REPORT = Path(__file__).resolve().parents[2] / "report"


def test_mean_std_cells():
    assert str(MeanStd.of([48.0, 49.0])) == "48.50 ± 0.71"  # sample std sqrt(0.5)
    assert str(MeanStd.of([48.414])) == "48.41"
    assert str(MeanStd.of([1.0, 1.5, 2.0], digits=3)) == "1.500 ± 0.500"
    parsed = MeanStd.parse("1.234 ± 0.010")
    assert (parsed.mean, parsed.std, parsed.digits) == (1.234, 0.010, 3)
    assert MeanStd.parse("48.41") == MeanStd(48.41, None, 2)


def _comparison() -> ComparisonTable:
    rows = [ComparisonRow("rope", 3, 1_234_567, MeanStd(2.125, 0.25, 3), MeanStd(48.5, 0.5), (47.75, 49.25),
                          {"chrf": MeanStd(70.25, 0.5), "ter": MeanStd(35.5, 1.25)}, 0.004, 0.002, "yes"),
            ComparisonRow("sinusoidal", 3, None, None, MeanStd(47.5, 0.75), (46.5, 48.5),
                          {"chrf": MeanStd(69.5, 0.25), "ter": MeanStd(36.0, 1.0)}, None, None, "—")]
    return ComparisonTable(rows, "sinusoidal", ("chrf", "ter"))


def test_comparison_table_written_as_archived_and_read_back():
    table = _comparison()
    text = table.to_csv()
    assert text.splitlines()[0] == ("scheme,seeds,parameters,valid loss,BLEU,BLEU 95% CI,chrF,TER,p vs sinusoidal,p MC SE,"
                                    "significant")
    assert text.splitlines()[1] == ('rope,3,"1,234,567",2.125 ± 0.250,48.50 ± 0.50,"[47.75, 49.25]",70.25 ± 0.50,'
                                    '35.50 ± 1.25,0.004,0.002,yes')
    assert table.markdown()[3] == ("| sinusoidal | 3 |  |  | 47.50 ± 0.75 | [46.50, 48.50] | 69.50 ± 0.25 | 36.00 ± 1.00 "
                                   "| — | — | — |")
    back = ComparisonTable.from_csv(text)
    assert back == table
    assert back.row("rope").significant and not back.row("sinusoidal").significant
    assert not back.row("rope").borderline
    # a verdict marked borderline is read back as marked, still a verdict ("yes (one seed, borderline)")
    near = replace(table.rows[0], p=0.041, p_se=0.0063, verdict="yes (one seed, borderline)")
    again = ComparisonTable.from_csv(replace(table, rows=[near, table.rows[1]]).to_csv()).row("rope")
    assert (again.p, again.p_se, again.significant, again.borderline) == (0.041, 0.006, True, True)
    assert back.cells(back.row("rope"), ["bleu", "ter"]) == ["48.50 ± 0.50", "35.50 ± 1.25"]


def test_a_verdict_is_read_back_as_written_not_judged_again():
    """p_holm 0.04996 is written 0.0500: read back, the pair stays significant as it was tested."""
    table = GroupsTable([GroupRow("a", 1, 50.0, "a"), GroupRow("b", 1, 49.0, "b")],
                        [PairTest("a", "b", 1.0, 0.02498, 0.04996, True, 0.00312, True)])
    text = table.to_csv()
    assert text.splitlines()[-2:] == ["a,b,difference,p,p_holm,significant,p_holm_se,borderline",
                                      "a,b,1.00,0.0250,0.0500,yes,0.0031,yes"]
    back = GroupsTable.from_csv(text)
    assert back.pairs[0].p_holm == 0.05 and back.pairs[0].significant and back.pairs[0].borderline
    assert back.pairs[0].p_holm_se == 0.0031
    assert back.letters == {"a": "a", "b": "b"}


def test_family_lines_with_and_without_a_margin():
    tests = [Hypothesis("rope", "sinusoidal", 3, 0.5, -0.25, 1.25, 0.125, 0.25, False, 0.0123, False),
             Hypothesis("alibi", "sinusoidal", 2, -1.5, -2.5, -0.5, 0.002, 0.045, True, 0.002, True)]
    text = family_csv(tests)
    assert text.splitlines()[1] == "rope,sinusoidal,3,+0.50,-0.25,+1.25,0.1250,0.2500,no,0.0123,no,,,,,,"
    assert text.splitlines()[2].endswith(",0.0450,yes,0.0020,yes,,,,,,")
    assert family_from_csv(text) == tests
    equal = [Hypothesis("rope", "sinusoidal", 3, 0.5, -0.25, 1.25, 0.125, 0.25, False, 0.0123, False, 1.0, 0.0125,
                        0.025, True, 0.0061, True)]
    assert family_csv(equal).splitlines()[1].endswith(",no,0.0123,no,1.00,0.0125,0.0250,yes,0.0061,yes")
    assert family_from_csv(family_csv(equal)) == equal


def test_length_table_round_trip():
    rows = [LengthRow("rope", 2, MeanStd(90.5, 0.5), MeanStd(30.25, 1.5), [MeanStd(99.0, 0.5), MeanStd(20.5, 2.0)],
                      (28.5, 32.0), 0.012, 0.005, "yes"),
            LengthRow("sinusoidal", 2, MeanStd(91.0, 0.25), MeanStd(25.0, 1.0), [MeanStd(98.5, 0.5), MeanStd(18.0, 1.0)],
                      (23.5, 26.5), None, None, "—")]
    table = LengthTable(rows, 12, ["3–4 (95)", "16–18 (63)"], "sinusoidal")
    lines = table.markdown()
    assert lines[0] == ("| scheme | seeds | BLEU ≤ 12 words | BLEU > 12 words | > 12: 95% CI | > 12: p vs sinusoidal | "
                        "> 12: p MC SE | > 12: significant | 3–4 (95) | 16–18 (63) |")
    text = table.to_csv()
    assert text.splitlines()[1] == ("rope,2,90.50 ± 0.50,30.25 ± 1.50,\"[28.50, 32.00]\",0.012,0.005,yes,99.00 ± 0.50,"
                                    "20.50 ± 2.00")
    assert LengthTable.from_csv(text) == table
    untested = LengthTable([LengthRow("rope", 1, MeanStd(90.5), None, [MeanStd(99.0)])], None, ["3–4 (95)"])
    assert untested.markdown()[0] == "| scheme | seeds | BLEU all | — | 3–4 (95) |"
    assert untested.to_csv() == "scheme,seeds,BLEU all,—,3–4 (95)\r\nrope,1,90.50,,99.00\r\n"
    assert LengthTable.from_csv(untested.to_csv()) == untested
    with pytest.raises(UserError, match="bleu_by_length_x.csv holds no table"):
        LengthTable.from_csv("", "bleu_by_length_x.csv")


def test_a_table_that_does_not_hold_its_columns_is_one_line():
    text = _comparison().to_csv()
    with pytest.raises(UserError, match="line 3"):
        ComparisonTable.from_csv(text.replace("47.50 ± 0.75", "forty"), "report/x/comparison_test.csv")
    with pytest.raises(UserError, match="no 'p vs' column"):
        ComparisonTable.from_csv(text.replace("p vs sinusoidal", "p"))
    with pytest.raises(UserError, match="columns .*expected"):
        family_from_csv("row,baseline\r\nrope,sinusoidal\r\n", "family_x_test.csv")
    with pytest.raises(UserError, match="the letters, an empty line and the pairs"):
        GroupsTable.from_csv("scheme,seeds,BLEU,group\r\nrope,1,2.00,a\r\n")


def _archived(pattern: str) -> list[Path]:
    found = sorted(REPORT.rglob(pattern))
    assert found, f"no {pattern} under report/"
    return found


def test_every_archived_table_reads_back_to_its_own_bytes():
    """The rows read from each archived CSV write that CSV again, byte for byte: the columns, the
    number formats and the verdicts of every archive are the contract's."""
    for path in _archived("comparison_*.csv"):
        text = path.read_bytes().decode("utf-8")
        assert ComparisonTable.from_csv(text, str(path)).to_csv() == text, path
    for path in _archived("groups_*.csv"):
        text = path.read_bytes().decode("utf-8")
        assert GroupsTable.from_csv(text, str(path)).to_csv() == text, path
    for path in _archived("family_*.csv"):
        text = path.read_bytes().decode("utf-8")
        assert family_csv(family_from_csv(text, str(path))) == text, path
    for path in _archived("bleu_by_length_*.csv"):
        text = path.read_bytes().decode("utf-8")
        table = LengthTable.from_csv(text, str(path))
        assert table.to_csv() == text, path
        beside = path.with_suffix(".md").read_text(encoding="utf-8").splitlines()
        assert table.markdown() == [line for line in beside if line.startswith("|")], path  # the same table


def test_cost_lines_round_trip_and_a_total_over_cpu_and_gpu_sums_no_core_hours():
    lines = [DeviceCost("CPU: x", 3, 4.25, 5.75, 1), DeviceCost("NVIDIA H100 80GB HBM3", 1, 0.5, 0.5, 0),
             DeviceCost("all", 4, 4.75, None, 1)]
    markdown = cost_markdown(lines)
    assert markdown[1] == "| --- | ---: | ---: | ---: | ---: |"
    assert markdown[4] == "| all | 4 | 4.8 | — | 1 |"
    schemes = [SchemeCost("CPU x, 1 thread(s), 2 run(s) at once", "rope", 2, 660.04, 1.204, None, 950.4)]
    text = cost_csv(lines, schemes)
    assert text.split("\r\n")[4:7] == ["", "shared machine,scheme,runs,\"s / 1,000 updates\",× sinusoidal,decoding sent/s,"
                                           "peak memory (MB)", "\"CPU x, 1 thread(s), 2 run(s) at once\",rope,2,660.0,1.20,—,950"]
    assert cost_from_csv(text) == (  # as written: one decimal, two for the ratio, none for memory
        [DeviceCost("CPU: x", 3, 4.2, 5.8, 1), DeviceCost("NVIDIA H100 80GB HBM3", 1, 0.5, 0.5, 0), DeviceCost("all", 4, 4.8, None, 1)],
        [SchemeCost("CPU x, 1 thread(s), 2 run(s) at once", "rope", 2, 660.0, 1.2, None, 950.0)])
    with pytest.raises(UserError, match="cost.csv: expected the devices, an empty line and the schemes"):
        cost_from_csv("\r\n".join(text.split("\r\n")[:5]), "cost.csv")
    for path in _archived("cost.csv"):
        text = path.read_bytes().decode("utf-8")
        devices, per_scheme = cost_from_csv(text, str(path))
        assert cost_csv(devices, per_scheme) == text, path
        beside = path.with_suffix(".md").read_text(encoding="utf-8")
        assert beside.split("\n\n")[0].splitlines() == cost_markdown(devices), path  # the same lines
