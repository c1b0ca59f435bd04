"""report.md is generated: equal to what the archive and the readings give, shaped as a paper, its
readings free of numbers; the placeholders, directives and tables against values worked out here."""
from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from reporting.document import (
    MACHINES_MARKER,
    README_MARKER,
    build_report,
    expand,
    readme_table,
    with_machines_table,
    with_readme_table,
)
from reporting.tables import comparison_table
from reporting.values import value
from tests.conftest import ROOT
from utils.errors import UserError

TEXT = ROOT / "report" / "text"
QUOTATION = re.compile(r"<!-- quotation: the seed project's table, as published -->\n(.*?)<!-- end of quotation -->\n",
                       re.S)
SEED_REFERENCE = ROOT.parent / "shared" / "reference" / "seed_project_results.md"


def test_report_md_and_readmes_table_are_what_the_archive_gives():
    """As for docs/: edit report/text/ or regenerate the archive, then run python -m nmt report."""
    assert (ROOT / "report.md").read_text(encoding="utf-8") == build_report(ROOT)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert with_readme_table(readme, ROOT) == readme
    assert readme_table(ROOT) in readme and "report.md#abstract" in readme
    performance = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert with_machines_table(performance, ROOT) == performance


def test_the_readings_hold_no_number_outside_the_seed_projects_quoted_table():
    readings = sorted(TEXT.glob("*.md"))
    assert readings
    quotations = []
    for path in readings:
        text = path.read_text(encoding="utf-8")
        quotations += QUOTATION.findall(text)
        # a placeholder names schemes and families (t5, schemes-2026 hold digits) and renders its numbers from the archive
        plain = re.sub(r"\{\{[^}]*\}\}", "", QUOTATION.sub("", text))
        digits = [(n, line) for n, line in enumerate(plain.splitlines(), 1) if re.search(r"\d", line)]
        assert not digits, f"{path.name}: a number in a reading (use a placeholder): {digits[0]}"
    assert len(quotations) == 1  # the seed project's table, and nothing else, quoted
    rows = [line for line in quotations[0].splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0].strip("| ") for row in rows] == ["sinusoidal", "learnable", "rope"]
    if SEED_REFERENCE.is_file():  # beside the checkout in CI: the quotation is the published table, figure for figure
        published = [line for line in SEED_REFERENCE.read_text(encoding="utf-8").splitlines()
                     if line.startswith(("| sinusoidal", "| learnable", "| rope"))]
        assert [row.split(" | ", 1)[1] for row in rows] == [line.split(" | ", 1)[1] for line in published]


def test_the_report_reads_as_a_paper():
    report = (ROOT / "report.md").read_text(encoding="utf-8")
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Abstract" and re.fullmatch(r"## 1\. .+", headings[1])
    abstract = report.split("## Abstract\n", 1)[1].split("\n## ", 1)[0].strip()
    # as rendered, its claims' clauses and every number included: at most 200 words
    assert len(abstract.split()) <= 200, f"the abstract has {len(abstract.split())} words"
    # it answers at both budgets: the short budget's confirmatory claims, the full budget's with their standing
    assert "confirmatory, Claim" in abstract and "exploratory, Claim" in abstract and "full budget" in abstract
    for number, heading in enumerate(headings[1:], start=1):
        assert heading.startswith(f"## {number}. ")
    assert "Seeds 2 of" not in report and "(issue " not in report  # no chronology


def write_archive(root: Path, bench: dict | None = None) -> None:
    """A tiny archive: the CPU study's table (CSV), its groups and cost, and a benchmark."""
    folder = root / "report" / "multi30k"
    folder.mkdir(parents=True)
    header = ["scheme", "seeds", "parameters", "valid loss", "BLEU", "BLEU 95% CI", "chrF++", "TER", "p vs sinusoidal",
              "p MC SE", "significant"]
    rows = [["rope", "3", "1", "2.7", "48.04 ± 0.17", "[46.34, 49.56]", "64.1", "36.1", "0.000", "0.002", "yes"],
            ["alibi", "3", "1", "2.7", "45.12 ± 0.15", "[43.53, 46.62]", "61.0", "38.0", "0.001", "0.002", "yes"],
            ["sinusoidal", "3", "1", "2.7", "43.66 ± 0.66", "[41.95, 45.33]", "60.0", "39.0", "—", "—", "—"],
            ["cape", "3", "1", "2.7", "43.00 ± 0.37", "[41.13, 44.27]", "59.0", "40.0", "0.330", "0.021", "no"],
            ["none", "3", "1", "2.7", "33.39 ± 0.24", "[31.95, 34.83]", "50.0", "50.0", "0.000", "0.002", "yes"]]
    for testset in ("test_2016_flickr", "test_2017_flickr"):
        with (folder / f"comparison_{testset}.csv").open("w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows([header, *rows])
    versus = [header[:-3] + ["p vs rope", "p MC SE", "significant"], rows[0][:-3] + ["—", "—", "—"],
              rows[1][:-3] + ["0.004", "0.003", "yes"], rows[3][:-3] + ["0.000", "0.002", "yes"]]
    with (folder / "comparison_vs_rope_test_2016_flickr.csv").open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(versus)
    groups = [["scheme", "seeds", "BLEU", "group"], ["rope", "3", "48.04", "a"], ["alibi", "3", "45.12", "b"],
              ["sinusoidal", "3", "43.66", "bc"], ["cape", "3", "43.00", "c"], ["none", "3", "33.39", "d"], [],
              ["a", "b", "difference", "p", "p_holm", "significant", "p_holm_se", "borderline"],
              ["rope", "alibi", "2.9", "0", "0", "yes", "0.0002", "no"], ["alibi", "sinusoidal", "1.4", "0.1", "0.4", "no", "0.006", "no"]]
    with (folder / "groups_test_2016_flickr.csv").open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(groups)
    cost = [["device", "runs", "training hours", "core-hours (CPU) / process-hours (GPU)", "upper bounds"],
            ["CPU: x", "15", "9.5", "19.0", "0"], ["all", "15", "9.5", "19.0", "0"], [],
            ["shared machine", "scheme", "runs", "s / 1,000 updates", "× sinusoidal", "decoding sent/s", "peak memory (MB)"]]
    with (folder / "cost.csv").open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(cost)
    if bench is not None:
        (root / "report" / "bench").mkdir(parents=True)
        (root / "report" / "bench" / "bench.json").write_text(json.dumps(bench), encoding="utf-8")


BENCH = {"device": "CPU: test", "date": "2026-11-26", "train.torch_nn_transformer.step_ms": 900.0,
         "train.sinusoidal.step_ms": 600.0, "train.rope.step_ms": 660.0, "train.alibi.step_ms": 630.0,
         "train.none.step_ms": 540.0, "train.cape.step_ms": 750.0}


def test_placeholders_are_the_archives_values(tmp_path):
    write_archive(tmp_path, BENCH)
    expected = {"cpu.top": "`rope`", "cpu.top.bleu": "48.04", "cpu.bottom": "`none`", "cpu.rows": "5",
                "cpu.baseline.bleu": "43.66", "cpu.first.better": "`rope` and `alibi`", "cpu.first.better.count": "2",
                "cpu.first.worse": "`none`", "cpu.first.group_a": "`rope`", "cpu.sinusoidal.group": "`bc`",
                "cpu.alibi.rank": "2", "cpu.cape.bleu": "43.00", "cpu.first.pairs.different": "1",
                "cpu.first.pairs.total": "2", "cpu.first.top": "`rope`", "cpu.runs": "15", "cpu.core_hours": "19.0", "cpu.seeds": "3",
                "cpu.spread": f"{(0.17 + 0.15 + 0.66 + 0.37 + 0.24) / 5:.2f}", "cpu.second.top.bleu": "48.04",
                "cpu.folder": "`report/multi30k/`", "name.corpus": "Multi30k",
                "bench.rope.cost": "1.10", "bench.slowest": "`cape`", "bench.slowest.cost": "1.25",
                "bench.fastest": "`none`", "bench.fastest.cost": "0.90", "bench.date": "2026-11-26",
                "cpu.alibi.p": "p = 0.001", "cpu.rope.p": "p < 0.001", "cpu.cape.p": "p = 0.330",
                "cpu.vs_rope.alibi.p": "p = 0.004", "cpu.vs_rope.cape.p": "p < 0.001",
                "cpu.vs_rope.baseline": "`rope`", "cpu.vs_rope.bottom.bleu": "43.00", "cpu.vs_rope.rows": "3"}
    for name, text in expected.items():
        assert value(tmp_path, name) == text, name
    assert expand(tmp_path, "Top: {{cpu.top}} ({{ cpu.top.bleu }}).\n", "x.md") == "Top: `rope` (48.04).\n"
    for bad, message in (("{{cpu.nothing}}", "unknown placeholder cpu.nothing"),
                         ("{{moon.top}}", "unknown placeholder moon.top"),
                         ("{{cpu.second.group_a}}", "no report/multi30k/groups_test_2017_flickr.csv"),
                         ("{{cpu.better.count}}", "placeholder cpu.better.count holds the verdicts of one test set: "
                                                  "name it (cpu.first.better.count or cpu.second.better.count)"),
                         ("{{full.top}}", "report/multi30k-best-all/comparison_test_2016_flickr.csv, which does not exist"),
                         ("{{cpu.sinusoidal.p}}", "`sinusoidal` is the baseline of that table"),
                         ("{{cpu.vs_rope.rope.p}}", "`rope` is the baseline of that table"),
                         ("{{cpu.vs_rope.group_a}}", "significance groups belong to the study's table"),
                         ("{{cpu.vs_kerple.top}}", "comparison_vs_kerple_test_2016_flickr.csv, which does not exist"),
                         ("{{table moon}}", "table directive needs a study"),
                         ("{{figure moon}}", "unknown figure moon")):
        with pytest.raises(UserError) as err:
            expand(tmp_path, f"first line\n{bad}\n", "report/text/x.md")
        assert str(err.value).startswith("report/text/x.md:2: ") and message in str(err.value), str(err.value)


def test_the_shown_table_cuts_columns_and_joins_groups_and_training_cost(tmp_path):
    write_archive(tmp_path, BENCH)
    lines = comparison_table(tmp_path, "cpu", "test_2016_flickr").splitlines()
    # the parameters, TER and the other metrics stay in the archived table
    assert lines[0] == ("| scheme | seeds | BLEU | BLEU 95% CI | chrF++ | p vs sinusoidal | "
                        "p MC SE | significant | group | training time × |")
    assert lines[2] == "| rope | 3 | 48.04 ± 0.17 | [46.34, 49.56] | 64.1 | 0.000 | 0.002 | yes | a | 1.10 |"  # 660/600
    assert lines[4] == "| sinusoidal | 3 | 43.66 ± 0.66 | [41.95, 45.33] | 60.0 | — | — | — | bc | 1.00 |"
    assert len(lines) == 7
    head = comparison_table(tmp_path, "cpu", "test_2016_flickr", limit=2).splitlines()
    assert head == lines[:4]
    # a declared family against the table's baseline: its difference, corrected p and verdict replace the
    # table's uncorrected p; a family against another baseline does not
    write_family(tmp_path, "test_2016_flickr", "papers", [["alibi", "rope", "3", "-2.92", "-3.5", "-2.3", "0", "0", "yes"]])
    assert comparison_table(tmp_path, "cpu", "test_2016_flickr").splitlines()[0] == lines[0]
    write_family(tmp_path, "test_2016_flickr", "vs-sinusoidal", [
        ["rope", "sinusoidal", "3", "+4.38", "+3.4", "+5.4", "0.0000", "0.0000", "yes"],
        ["cape", "sinusoidal", "3", "-0.66", "-1.5", "+0.2", "0.1200", "0.2400", "no"]])
    tested = comparison_table(tmp_path, "cpu", "test_2016_flickr").splitlines()
    assert tested[0] == ("| scheme | seeds | BLEU | BLEU 95% CI | chrF++ | Δ vs sinusoidal | "
                         "p (Holm) ± MC SE | significant | group | training time × |")
    assert tested[2].endswith("| 64.1 | +4.38 | 0.0000 ± 0.0001 | yes | a | 1.10 |")
    assert tested[5].startswith("| cape |") and tested[5].endswith("| -0.66 | 0.2400 ± 0.0001 | no | c | 1.25 |")
    assert tested[3].endswith("| — | — | — | b | 1.05 |")  # alibi: not in the family
    # no groups for the other test set, no benchmark: those columns are left out, not left empty
    (tmp_path / "report" / "bench" / "bench.json").unlink()
    plain = comparison_table(tmp_path, "cpu", "test_2017_flickr").splitlines()
    assert plain[0] == ("| scheme | seeds | BLEU | BLEU 95% CI | chrF++ | p vs sinusoidal | "
                        "p MC SE | significant |")


def copied_checkout(tmp_path: Path, archive: bool = True) -> Path:
    """What ``nmt report --root`` reads, copied: the archive (or, without it, the readings alone), the study
    files and configs, README.md and docs/performance.md (report.md is the caller's)."""
    root = tmp_path / "checkout"
    if archive:
        shutil.copytree(ROOT / "report", root / "report", ignore=shutil.ignore_patterns("*.png"))
        shutil.copytree(ROOT / "studies", root / "studies", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
        shutil.copytree(ROOT / "configs", root / "configs")
    else:
        shutil.copytree(ROOT / "report" / "text", root / "report" / "text")
    (root / "docs").mkdir(parents=True)
    for page in ("README.md", "docs/performance.md"):
        shutil.copy(ROOT / page, root / page)
    return root


def test_the_command_writes_report_and_readme_and_check_fails_when_stale(tmp_path, capsys):
    from nmt.report import main

    root = copied_checkout(tmp_path)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (root / "README.md").write_text(readme.replace(readme_table(ROOT), README_MARKER + "\n| stale |\n"),
                                    encoding="utf-8")
    performance = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    (root / "docs" / "performance.md").write_text(performance.replace(MACHINES_MARKER, MACHINES_MARKER + "\n| stale |"),
                                                  encoding="utf-8")
    with pytest.raises(UserError, match=r"out of date with the archive and readings: .*report.md, .*README.md, "
                                        r".*performance.md \(an edit made by hand is lost: edit report/text/ and run "
                                        r"python -m nmt report\)(.|\n)*performance.md:\d+: reads '\| stale \|' where the readings give "):
        main(["--check", "--root", str(root)])
    main(["--root", str(root)])
    assert (root / "report.md").read_text(encoding="utf-8") == (ROOT / "report.md").read_text(encoding="utf-8")
    assert (root / "README.md").read_text(encoding="utf-8") == readme
    assert (root / "docs" / "performance.md").read_text(encoding="utf-8") == performance
    main(["--check", "--root", str(root)])
    assert capsys.readouterr().out.endswith("report.md, README's table and docs/performance.md's machines match the "
                                            "archive\n")
    (root / "report" / "text" / "threats.md").write_text("## Threats\n\n{{cpu.moon}}\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"threats.md:3: unknown placeholder cpu.moon"):
        main(["--root", str(root)])


def write_family(root: Path, testset: str, name: str, lines: list[list[str]], equivalence: bool = False) -> None:
    """A family CSV as ``scoring.families`` archives it, lines written here (with ``equivalence``, the
    lines hold a margin's four cells; without, those cells are empty)."""
    folder = root / "report" / "multi30k"
    folder.mkdir(parents=True, exist_ok=True)
    header = ["row", "baseline", "seeds", "difference", "low", "high", "p", "p_holm", "significant", "p_holm_se",
              "borderline", "margin", "p_equivalence", "p_equivalence_holm", "equivalent", "p_equivalence_holm_se",
              "equivalence_borderline"]
    # each corrected p with a Monte Carlo error small enough that no verdict here is borderline
    lines = [[*line[:9], "0.0001", "no", *(line[9:] + ["0.0001", "no"] if equivalence else [""] * 6)] for line in lines]
    with (folder / f"family_{name}_{testset}.csv").open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([header, *lines])


def test_a_claim_renders_its_declared_test_and_refuses_what_the_archive_does_not_support(tmp_path):
    from reporting.claims import render_claim

    first, second = "test_2016_flickr", "test_2017_flickr"
    write_family(tmp_path, first, "papers", [["fox", "alibi", "3", "+0.52", "+0.21", "+0.83", "0.0004", "0.0032", "yes"],
                                             ["cope", "rope", "3", "-0.40", "-0.90", "+0.10", "0.0300", "0.2100", "no"]])
    write_family(tmp_path, second, "papers", [["fox", "alibi", "3", "+0.31", "-0.02", "+0.64", "0.0200", "0.1400", "no"],
                                              ["cope", "rope", "3", "-0.10", "-0.60", "+0.40", "0.6000", "1.0000", "no"]])
    write_family(tmp_path, first, "vs-sinusoidal", [["rope", "sinusoidal", "3", "+1.20", "+0.70", "+1.70", "0.0000",
                                                     "0.0000", "yes"]])
    # supported on the test set named: the difference, its interval, p and the family's corrected p
    assert render_claim(tmp_path, "claim cpu.first: fox > alibi") == (
        "(+0.52 BLEU [+0.21, +0.83], p < 0.001, Holm p 0.003; papers)")
    # the same pair the other way round: the sign and the interval flip
    assert render_claim(tmp_path, "claim cpu.first: alibi < fox") == (
        "(-0.52 BLEU [-0.83, -0.21], p < 0.001, Holm p 0.003; papers)")
    # without a test set a claim must hold on both: here the second does not support it (Holm p 0.14)
    with pytest.raises(UserError, match=r"^unsupported claim 'fox > alibi' \(fox above alibi\) of cpu on "
                                        r"test_2017_flickr: \+0\.31 BLEU \[-0\.02, \+0\.64\], p 0\.020, Holm p 0\.140 "
                                        r"in family papers \(level 0\.05\)$"):
        render_claim(tmp_path, "claim cpu: fox > alibi")
    with pytest.raises(UserError, match="unsupported claim 'fox < alibi'"):
        render_claim(tmp_path, "claim cpu.first: fox < alibi")  # significant, but the other way
    # no difference: supported where the corrected p is not below the level, shown with its interval
    assert render_claim(tmp_path, "claim cpu: cope ~ rope") == (
        "(-0.40 [-0.90, +0.10] and -0.10 [-0.60, +0.40] BLEU, p 0.030 and 0.600, Holm p 0.210 and 1.000; papers)")
    write_family(tmp_path, second, "vs-sinusoidal", [["rope", "sinusoidal", "3", "+1.10", "+0.60", "+1.60", "0.0000",
                                                      "0.0000", "yes"]])
    assert render_claim(tmp_path, "claim cpu: rope > sinusoidal") == (  # equal p-values said once
        "(+1.20 [+0.70, +1.70] and +1.10 [+0.60, +1.60] BLEU, p < 0.001 on both, Holm p < 0.001 on both; "
        "vs-sinusoidal)")
    with pytest.raises(UserError, match="unsupported claim 'fox ~ alibi'"):
        render_claim(tmp_path, "claim cpu.first: fox ~ alibi")
    # a pair no family declares, a family that does not hold it, and words that are not a claim
    with pytest.raises(UserError, match=r"'xl' vs 'rope' is not tested in any declared family of cpu on test_2016"):
        render_claim(tmp_path, "claim cpu.first: xl > rope")
    with pytest.raises(UserError, match=r"not tested in family 'vs-sinusoidal'"):
        render_claim(tmp_path, "claim cpu.first: fox > alibi in vs-sinusoidal")
    assert render_claim(tmp_path, "claim cpu.first: rope > sinusoidal in vs-sinusoidal").startswith("(+1.20 BLEU")
    with pytest.raises(UserError, match="a claim reads"):
        render_claim(tmp_path, "claim cpu: fox beats alibi")
    # equivalence: '=' only on a family that declared a margin, where the corrected TOST p is below the level
    with pytest.raises(UserError, match=r"'=' needs an equivalence margin, and family papers declares none"):
        render_claim(tmp_path, "claim cpu: cope = rope")
    tost = ["1.00", "0.0040", "0.0080"]
    write_family(tmp_path, first, "close", [["cope", "rope", "3", "-0.10", "-0.60", "+0.40", "0.6000", "1.0000", "no",
                                             *tost, "yes"],
                                            ["p_rope", "rope", "3", "-0.70", "-1.60", "+0.20", "0.1000", "0.2000", "no",
                                             "1.00", "0.3000", "0.6000", "no"]], equivalence=True)
    assert render_claim(tmp_path, "claim cpu.first: cope = rope in close") == (
        "(-0.10 BLEU [-0.60, +0.40], within ±1.00: TOST Holm p 0.008; close, exploratory)")  # declared nowhere
    with pytest.raises(UserError, match=r"unsupported claim 'p_rope = rope' \(p_rope equivalent to rope\) of cpu on "
                                        r"test_2016_flickr: -0\.70 BLEU \[-1\.60, \+0\.20\], within ±1\.00: TOST Holm p "
                                        r"0\.600 in family close"):
        render_claim(tmp_path, "claim cpu.first: p_rope = rope")  # not shown to differ is not equivalence
    assert render_claim(tmp_path, "claim cpu.first: p_rope ~ rope").endswith("Holm p 0.200; close, exploratory)")


def test_a_claim_on_a_borderline_verdict_is_refused_with_its_monte_carlo_error(tmp_path):
    """Holm p 0.0420 with a Monte Carlo error of 0.0040: within 3 errors of 0.05 (0.008 < 0.012), so
    another draw of the bootstrap may turn it; no claim rests on it, in either direction or as '~'.
    The same p with an error of 0.0020 (0.008 >= 0.006) is a verdict."""
    from reporting.claims import render_claim

    first = "test_2016_flickr"
    folder = tmp_path / "report" / "multi30k"
    folder.mkdir(parents=True)
    header = ["row", "baseline", "seeds", "difference", "low", "high", "p", "p_holm", "significant", "p_holm_se",
              "borderline", "margin", "p_equivalence", "p_equivalence_holm", "equivalent", "p_equivalence_holm_se",
              "equivalence_borderline"]
    line = ["fox", "alibi", "3", "+0.52", "+0.21", "+0.83", "0.0060", "0.0420", "yes"]
    with (folder / f"family_papers_{first}.csv").open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([header, [*line, "0.0040", "yes", *[""] * 6]])
    for claim in ("fox > alibi", "fox ~ alibi"):
        with pytest.raises(UserError, match=rf"^claim '{claim}' of cpu on {first} rests on a borderline verdict: Holm "
                                            r"p 0\.0420 ± 0\.0040 \(its Monte Carlo standard error\) lies within 3 of "
                                            r"them of 0\.05"):
            render_claim(tmp_path, f"claim cpu.first: {claim}")
    with (folder / f"family_papers_{first}.csv").open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([header, [*line, "0.0020", "no", *[""] * 6]])
    assert render_claim(tmp_path, "claim cpu.first: fox > alibi").startswith("(+0.52 BLEU [+0.21, +0.83], p 0.006")


def plant(reading: Path, line: str) -> str:
    """``line`` written into ``reading`` as its third line; returns the text it had."""
    original = reading.read_text(encoding="utf-8")
    lines = original.splitlines()
    reading.write_text("\n".join([*lines[:2], line, *lines[2:]]) + "\n", encoding="utf-8")
    return original


def test_report_check_fails_on_an_unsupported_claim_naming_file_and_line(tmp_path):
    from nmt.report import main

    root = copied_checkout(tmp_path)
    shutil.copy(ROOT / "report.md", root / "report.md")
    main(["--check", "--root", str(root)])
    # the bottom row claimed above sinusoidal: the archive says the opposite
    reading = root / "report" / "text" / "full.md"
    original = plant(reading, "Randomized positions beat sinusoidal {{claim full: randomized > sinusoidal}}.")
    with pytest.raises(UserError, match=r"full\.md:3: unsupported claim 'randomized > sinusoidal'"):
        main(["--check", "--root", str(root)])
    reading.write_text(original, encoding="utf-8")
    # a supported claim of a family declared after its study's first run: exploratory, kept out of the abstract
    abstract = root / "report" / "text" / "abstract.md"
    text = abstract.read_text(encoding="utf-8")
    abstract.write_text(text + "RoPE is above sinusoidal {{claim full.second: rope > sinusoidal}}.\n", encoding="utf-8")
    line = len(text.splitlines()) + 1
    with pytest.raises(UserError, match=rf"abstract\.md:{line}: the abstract's \(or conclusion's\) claim 'rope > "
                                        r"sinusoidal' rests on family vs-sinusoidal of full, which is not confirmatory "
                                        r"\(Exploratory: declared 2026-11-27 10:36 UTC, after the first run "
                                        r"\(2026-11-25 11:02 UTC\)"):
        main(["--check", "--root", str(root)])
    # written as exploratory it may stand there; written as confirmatory it is refused everywhere
    abstract.write_text(text + "{{claim full.second: rope > sinusoidal, exploratory}}.\n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        main(["--check", "--root", str(root)])
    # refused only for its length: the clause it renders takes the abstract past its words
    assert f"abstract.md:{line}:" not in str(err.value) and re.search(r"abstract\.md:1: the abstract renders \d+ words",
                                                                     str(err.value))
    abstract.write_text(text + "{{claim full.second: rope > sinusoidal, confirmatory}}.\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"abstract\.md:{line}: claim 'rope > sinusoidal' of full says confirmatory, "
                                        r"but family vs-sinusoidal is exploratory"):
        main(["--check", "--root", str(root)])
    from reporting.claims import render_claim

    assert render_claim(root, "claim full.second: rope > sinusoidal").endswith("; vs-sinusoidal, exploratory)")
    assert render_claim(root, "claim short: rope > sinusoidal").endswith("; vs-sinusoidal)")  # declared first


def test_every_comparative_reading_rests_on_claims_not_on_uncorrected_p_values():
    """The readings quote no table p-value (uncorrected) and state their findings through claims."""
    for name in ("abstract", "short", "full"):
        text = (TEXT / f"{name}.md").read_text(encoding="utf-8")
        assert not re.search(r"\{\{[^}]*\.p\}\}", text), f"{name}.md quotes an uncorrected p-value"
        assert "{{claim " in text, f"{name}.md states no claim"


def test_tables_and_figures_are_numbered_in_order_and_referenced_before_they_appear(tmp_path):
    from reporting.document import numbering

    texts = ["See {{ref table kernels}} and {{ref figure curves}}.\n\n{{figure budgets}}\n",
             "{{table demo head}}\n\n{{kernels}}\n\n{{figure curves}}\n\n{{table demo second}}\n"]
    numbers = numbering(texts)
    assert numbers.numbers == {("figure", "budgets"): 1, ("table", "demo"): 1, ("table", "kernels"): 2,
                               ("figure", "curves"): 2, ("table", "demo second"): 3}
    assert expand(ROOT, texts[0], "x.md", numbers).splitlines()[0] == "See Table 2 and Figure 2."
    assert "**Figure 1.** Each scheme's BLEU at the full budget (open)" in expand(ROOT, texts[0], "x.md", numbers)
    with pytest.raises(UserError, match=r"^x\.md:1: no table 'short' in the report"):
        expand(ROOT, "As {{ref table short}} shows.\n", "x.md", numbers)


def test_citations_carry_their_years_and_the_reference_list_holds_every_scheme_paper():
    from models.positional import SCHEMES
    from reporting.references import WORKS, cite, cited_paper, reference_list, scheme_work

    assert cite(["koehn", "clark"]) == "(Koehn 2004; Clark et al. 2011)"
    with pytest.raises(UserError, match="cite names unknown work 'nobody'"):
        cite(["nobody"])
    for scheme in SCHEMES.values():  # each card names its paper by the bibliography's key; prose cites it
        work = WORKS[scheme_work(scheme.card.paper)]
        assert cited_paper(scheme.card.paper) == f"{work.authors} {work.year}"
    with pytest.raises(UserError, match=r"the scheme paper 'Vaswani et al. 2017' is not a key of the bibliography"):
        scheme_work("Vaswani et al. 2017")  # a citation, not its key: no first word is read off it
    assert cited_paper("Your Name 2026") == "Your Name 2026"  # a plugin's paper, outside the bibliography
    listed = reference_list(["koehn", "holm", "koehn"]).splitlines()
    assert listed == ["- Holm (1979). A Simple Sequentially Rejective Multiple Test Procedure. *Scandinavian Journal "
                      "of Statistics*.", "- Koehn (2004). Statistical Significance Tests for Machine Translation "
                      "Evaluation. *EMNLP*."]
    report = (ROOT / "report.md").read_text(encoding="utf-8")
    references = report.split("References\n", 1)[1]
    for key in re.findall(r"\{\{cite ([^}]+)\}\}", "".join(p.read_text(encoding="utf-8") for p in TEXT.glob("*.md"))):
        for one in key.split():
            assert f"- {WORKS[one].authors} ({WORKS[one].year}). {WORKS[one].title}." in references


def test_a_setup_paragraph_names_how_its_recipe_differs_from_the_short_budgets():
    import yaml

    from reporting.setup import setup_paragraph

    def first(folder: str) -> dict:
        return yaml.safe_load(next(p for p in sorted((ROOT / folder).glob("*/config.yaml"))).read_text(encoding="utf-8"))

    short, full, cpu = first("report/multi30k-short-h100"), first("report/multi30k-best-all"), first("report/multi30k")
    text = setup_paragraph(ROOT, "full")
    # one recipe: the full budget differs from the short one in its updates alone
    assert f"`train.max_steps` {short['train']['max_steps']} → {full['train']['max_steps']}" in text
    assert "`model.dropout`" not in text and "`train.warmup_steps`" not in text
    on_cpus = setup_paragraph(ROOT, "cpu")  # the CPU reproduction's own recipe
    for section, key in (("model", "dropout"), ("train", "warmup_steps")):
        assert short[section][key] != cpu[section][key]
        assert f"`{section}.{key}` {short[section][key]} → {cpu[section][key]}" in on_cpus
    assert "`train.lr`" not in text and "`seed`" not in text  # what does not differ, and what differs by design
    manifests = [json.loads(p.read_text(encoding="utf-8")) for p in (ROOT / "report" / "multi30k-best-all").glob("*/manifest.json")]
    assert f"Arithmetic: {len(manifests)} × {manifests[0]['device']}, torch {manifests[0]['packages']['torch']}, bf16." in text
    assert "Config against" not in setup_paragraph(ROOT, "short")


def test_the_prose_guard_finds_comparisons_by_form_and_refuses_what_a_claim_does_not_write():
    """Planted breaches of each kind the review found passing a word list — a synonym, a negation, swapped
    roles, a comparative after a claim, equivalence words, a number off by tenths, a number in words,
    an unsupported summary, a verb of evidence, another scheme or value beside a claim, a results
    paragraph without its standing — each a breach naming file, line and reason; another work's quoted
    words, code spans, words of time and values read off a test pass."""
    from reporting.comparatives import comparative_breaches

    def breach(text: str) -> str:
        found = comparative_breaches(text, "r.md")
        assert found, f"passed: {text!r}"
        return found[0]

    claim = "{{claim short: rope > sinusoidal}}"
    planted = {
        "Setup.\n\nRoPE is stronger than sinusoidal.\n": r"r\.md:3: 'stronger' compares without a claim",  # -er form
        "Learned positions are the weakest of the schemes.\n": r"r\.md:1: 'weakest' compares",  # -est form
        "ALiBi is more robust than `sinusoidal`.\n": r"'more' compares",
        "RoPE does not lead sinusoidal.\n": r"'lead' compares",  # negated: still a comparison to test
        "FIRE is equivalent to sinusoidal.\n": r"'equivalent' compares",
        "KERPLE scores the same as ALiBi.\n": r"'same' compares",
        "PoPE is on par with RoPE.\n": r"'on par' compares",
        f"Sinusoidal trails RoPE {claim}.\n": r"'trails' outside the claim",  # swapped roles around a claim
        f"One.\nTwo: {claim}, and it is the strongest scheme.\n": r"r\.md:2: 'strongest' outside the claim",
        f"{claim}, as is xPos.\n": r"names no other scheme outside it \(here: xpos\)",
        f"{claim} at {{{{short.rope.bleu}}}} BLEU.\n": r"shows no other number \(\{\{short\.rope\.bleu\}\}\)",
        "RoPE gains 4.3 BLEU over sinusoidal.\n": r"the number '4\.3' is written in the reading",
        "The gap is about four BLEU points.\n": r"'four BLEU' spells a number next to a metric",
        "Each scheme's interval covers ninety-five per cent.\n": r"'ninety-five per cent' spells a number",
        "Relative encodings are the better choice.\n": r"'better' compares",  # an unsupported summary
        "The full budget confirms this order of the schemes.\n": r"'confirms' states evidence about results",
        "These runs replicate the seed project's results.\n": r"'replicate' states evidence",
        "**Reading.** RoPE reaches {{short.rope.bleu}} BLEU.\n": r"r\.md:1: a results paragraph says whether it is "
                                                             r"confirmatory or exploratory",
    }
    for text, reason in planted.items():
        assert re.search(reason, breach(text)), (text, breach(text))
    for fine in ("{{Claim short: rope > sinusoidal}}, and {{claim short: learnable < sinusoidal}}.\n",
                 "**Reading (exploratory).** The rows above it: {{full.better}}; the best group holds {{full.group_a}}.\n",
                 "Not word-level BLEU for the newest schemes, trained at least once.\n",
                 "The encoder and decoder layers of every scheme use the `--faster` flag.\n",
                 "Sentences get longer and harder.\n",  # no scheme, no result named: not a comparison of rows
                 "<!-- quotation: a paper's own words -->\nOurs beats every scheme by 4.3 BLEU.\n<!-- end of quotation -->\n",
                 "| table | better |\n| --- | --- |\n"):
        assert not comparative_breaches(fine, "r.md"), comparative_breaches(fine, "r.md")


def test_report_check_names_every_breach_and_every_hand_edit_with_file_and_line(tmp_path, capsys):
    """Three breaches planted in two readings (a bare comparative, a comparison word beside a claim, an
    unsupported claim): --check names each as FILE:LINE with its reason, in the readings' order, not just the first;
    and a line of report.md edited by hand is named at its own line."""
    from nmt.report import main

    root = copied_checkout(tmp_path)
    report = (ROOT / "report.md").read_text(encoding="utf-8").splitlines()
    edited = next(n for n, line in enumerate(report) if line.startswith("RoPE") or " RoPE " in line)
    report[edited] += " And it beats every other scheme."
    (root / "report.md").write_text("\n".join(report) + "\n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        main(["--check", "--root", str(root)])
    assert f"report.md:{edited + 1}: reads " in str(err.value) and "beats every other scheme.'" in str(err.value)
    plant(root / "report" / "text" / "full.md", "{{Claim full: randomized > sinusoidal}}.")
    plant(root / "report" / "text" / "short.md", "RoPE beats sinusoidal at every budget.")
    text = (root / "report" / "text" / "short.md").read_text(encoding="utf-8")
    (root / "report" / "text" / "short.md").write_text(
        text + "\nALiBi trails sinusoidal {{claim short: alibi > sinusoidal}}.\n", encoding="utf-8")
    last = len(text.splitlines()) + 2
    with pytest.raises(UserError) as err:
        main(["--check", "--root", str(root)])
    lines = str(err.value).splitlines()
    assert len(lines) == 3 and "(and 2 more, each on its own line below)" in lines[0]
    assert re.search(r"short\.md:3: 'beats' compares without a claim directive", lines[0])
    assert re.search(rf"short\.md:{last}: 'trails' outside the claim", lines[1])
    assert re.search(r"full\.md:3: unsupported claim 'randomized > sinusoidal'", lines[2])


def test_report_check_fails_on_a_planted_comparative_naming_file_and_line(tmp_path):
    from nmt.report import main

    root = copied_checkout(tmp_path, archive=False)
    # without the archives every placeholder breaks too: the breach is planted early enough to be among those listed
    plant(root / "report" / "text" / "introduction.md", "RoPE beats sinusoidal at every budget.")
    with pytest.raises(UserError, match=r"introduction\.md:3: 'beats' compares without a claim directive"):
        main(["--check", "--root", str(root)])


def test_each_claim_is_numbered_once_and_its_evidence_listed_in_the_claims_table(tmp_path):
    """A claim renders its sizes and its number where it is made; made again it keeps its number; the
    claims table lists each once with its whole evidence."""
    from reporting.document import Numbering, expand

    write_family(tmp_path, "test_2016_flickr", "papers",
                 [["fox", "alibi", "3", "+0.52", "+0.21", "+0.83", "0.0004", "0.0032", "yes"],
                  ["cope", "rope", "3", "-0.40", "-0.90", "+0.10", "0.0300", "0.2100", "no"]])
    numbers = Numbering()
    text = ("{{Claim cpu.first: fox > alibi}}.\n\nThen {{claim cpu.first: cope ~ rope}}; and again "
            "{{claim  cpu.first:  fox > alibi}}.\n")
    assert expand(tmp_path, text, "x.md", numbers) == (
        "FoX is above ALiBi on the first test set (+0.52 BLEU; confirmatory, Claim 1).\n\nThen CoPE is not shown to "
        "differ from RoPE on the first test set (-0.40 BLEU; confirmatory, Claim 2); and again FoX is above ALiBi on "
        "the first test set (+0.52 BLEU; confirmatory, Claim 1).\n")
    assert numbers.claims_table().splitlines() == [
        "| claim | says | evidence |", "| --- | --- | --- |",
        "| 1 | cpu.first: `fox > alibi` | +0.52 BLEU [+0.21, +0.83], p < 0.001, Holm p 0.003; papers |",
        "| 2 | cpu.first: `cope ~ rope` | -0.40 BLEU [-0.90, +0.10], p 0.030, Holm p 0.210; papers |"]


def test_readmes_gpu_paragraph_counts_the_sittings_of_the_archived_runs():
    """Runs that overlap in time (or follow one another on a freed worker) are one sitting; a run that
    starts after every earlier run finished opens the next: here 3 runs, then 1 started 5 minutes after."""
    from types import SimpleNamespace

    from reporting.document import README_GPU_MARKER
    from reporting.setup import sittings

    def run(start: str, end: str):
        return SimpleNamespace(started=f"2026-11-27T13:{start}+00:00", last_finished=f"2026-11-27T13:{end}+00:00")

    runs = [run("00:00", "03:00"), run("00:05", "02:00"), run("02:30", "05:00"), run("10:00", "12:00")]
    assert [len(group) for group in sittings(runs[::-1])] == [3, 1]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = readme.split(README_GPU_MARKER + "\n", 1)[1].split("\n\n", 1)[0]
    archived = len(list((ROOT / "report" / "multi30k-short-h100").glob("*/manifest.json")))
    assert paragraph.startswith(f"Its {archived} archived runs came in ")
    with pytest.raises(UserError, match="README.md has no line .*manifests"):
        with_readme_table(readme.replace(README_GPU_MARKER, ""), ROOT)


def test_an_interaction_claim_says_how_a_gap_moves_between_the_budgets_and_captions_say_their_standing():
    """The budget family (a row's gap to sinusoidal at the full budget minus its gap after the short one):
    its claim names the family and writes the move its archived differences give, in both directions of
    sign; the same pair unnamed is the study's own family; each table's caption says its standing."""
    import csv

    from reporting.claims import render_clause
    from reporting.document import Numbering
    from reporting.sources import STUDIES
    from reporting.tables import table_caption

    def archived(row: str) -> list[float]:
        found = []
        for testset in STUDIES["full"].testsets:
            path = ROOT / STUDIES["full"].folder / f"family_budget_{testset}.csv"
            found += [float(r["difference"]) for r in csv.DictReader(path.open(encoding="utf-8")) if r["row"] == row]
        return found

    numbers = Numbering()
    rope, t5 = archived("rope"), archived("t5")
    assert all(d < 0 for d in rope) and all(d > 0 for d in t5)  # what the archive holds, read here on its own
    said, _ = render_clause(ROOT, "Claim full: rope < sinusoidal in budget", numbers.claim)
    assert said == (f"RoPE's difference from sinusoidal falls from the short budget to the full budget "
                    f"({rope[0]:+.2f} and {rope[1]:+.2f} BLEU; exploratory, Claim 1)")
    said, _ = render_clause(ROOT, "claim full: t5 > sinusoidal in budget", numbers.claim)
    assert said.startswith("T5's buckets' difference from sinusoidal rises from the short budget to the full budget (")
    with pytest.raises(UserError, match="unsupported claim 'rope > sinusoidal'"):
        render_clause(ROOT, "claim full: rope > sinusoidal in budget", numbers.claim)
    _, evidence = render_clause(ROOT, "claim full.second: rope > sinusoidal", numbers.claim)
    assert evidence.endswith("; vs-sinusoidal, exploratory)")  # not the budget family, which holds the pair too
    short = table_caption(ROOT, "short", STUDIES["short"].testsets[0], "x")
    full = table_caption(ROOT, "full", STUDIES["full"].testsets[0], "x")
    assert "Confirmatory: family `vs-sinusoidal` was declared before the runs." in short
    assert "Exploratory: family `vs-sinusoidal` was named after the runs." in full and "budget" not in full


def test_a_bibliography_entry_without_its_four_fields_is_one_line_naming_it(tmp_path):
    from reporting.references import read_works

    path = tmp_path / "works.yaml"
    path.write_text("koehn: {authors: Koehn, year: 2004, title: Significance}\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"works\.yaml: the work 'koehn' needs authors, year, title and venue"):
        read_works(path)
    path.write_text("koehn: {authors: Koehn, year: 2004, title: Significance, venue: EMNLP}\n", encoding="utf-8")
    assert read_works(path)["koehn"].cited == "Koehn 2004"


def test_the_machines_table_groups_each_archives_runs_by_card_and_counts_the_queue(tmp_path):
    """docs/performance.md's table: an archive whose runs ran on two cards shows a line per card (the most
    runs first, its days from the manifests), a study with no run shows the runs gpu/queue.yaml holds for it,
    one with neither says no run yet. Expected lines written here from the manifests and the queue file."""
    import yaml

    from reporting.machines import machines_table
    from studies.catalog import load_studies

    source = ROOT / "report" / "multi30k-bf16"
    runs = sorted(p.parent for p in source.glob("*/manifest.json"))
    archive = tmp_path / "report" / "multi30k-bf16"
    for run in runs:  # a run folder as the table reads it: its manifest and resolved config
        (archive / run.name).mkdir(parents=True)
        for name in ("manifest.json", "config.yaml"):
            shutil.copy(run / name, archive / run.name / name)
    moved = [archive / run.name / "manifest.json" for run in runs[:2]]
    for path in moved:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest.update(device="NVIDIA H200", started="2026-12-01T10:00:00+00:00",
                        last_finished="2026-12-02T01:00:00+00:00", packages={**manifest["packages"], "torch": "2.13.0"})
        path.write_text(json.dumps(manifest), encoding="utf-8")
    kept = [json.loads((run / "manifest.json").read_text(encoding="utf-8")) for run in runs[2:]]
    days = sorted(day[:10] for m in kept for day in (m["started"], m["last_finished"]))
    span = days[0] if days[0] == days[-1] else f"{days[0]} – {days[-1]}"
    assert {m["device"] for m in kept} == {"NVIDIA H100 80GB HBM3"} and {m["packages"]["torch"] for m in kept} == {"2.11.0"}

    lines = machines_table(tmp_path).splitlines()
    mine = [line for line in lines if line.startswith("| `multi30k-bf16` |")]
    assert mine == [f"| `multi30k-bf16` | {len(runs) - 2} | NVIDIA H100 80GB HBM3, torch 2.11.0, bf16 | {span} | — |",
                    "| `multi30k-bf16` | 2 | NVIDIA H200, torch 2.13.0, bf16 | 2026-12-01 – 2026-12-02 |  |"]
    queue = yaml.safe_load((ROOT / "gpu" / "queue.yaml").read_text(encoding="utf-8"))["entries"]
    studies = load_studies()
    length = studies["multi30k-length"]
    queued = sum(len(e.get("rows") or length.schemes) * len(e.get("seeds") or length.seeds)
                 for e in queue if e["study"] == "multi30k-length")
    assert queued == 3 * len(length.schemes)
    assert f"| `multi30k-length` | 0 | no run yet: its first GPU wave fixes the card | — | {queued} |" in lines
    assert "| `iwslt2017` | 0 | no run yet | — | — |" in lines
    shown = [line.split("`")[1] for line in lines[3:]]
    assert set(shown) == {name for name, s in studies.items() if s.archive is not None}
