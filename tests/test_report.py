"""report.md is generated: equal to what the archive and the readings give, shaped as a paper, its
readings free of numbers; the placeholders, directives and tables against values worked out here."""
from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from reporting.document import README_MARKER, build_report, expand, readme_table, with_readme_table
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


def test_the_readings_hold_no_number_outside_the_seed_projects_quoted_table():
    readings = sorted(TEXT.glob("*.md"))
    assert readings
    quotations = []
    for path in readings:
        text = path.read_text(encoding="utf-8")
        quotations += QUOTATION.findall(text)
        digits = [(n, line) for n, line in enumerate(QUOTATION.sub("", text).splitlines(), 1) if re.search(r"\d", line)]
        assert not digits, f"{path.name}: a number in a reading (use a placeholder): {digits[0]}"
    assert len(quotations) == 1  # the seed project's table, and nothing else, quoted
    rows = [line for line in quotations[0].splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0].strip("| ") for row in rows] == ["sinusoidal", "learnable", "rope"]
    if SEED_REFERENCE.is_file():  # beside the checkout in CI: the quotation is the published table, figure for figure
        published = [line for line in SEED_REFERENCE.read_text(encoding="utf-8").splitlines()
                     if line.startswith(("| sinusoidal", "| learnable", "| rope"))]
        assert [row.split(" | ", 1)[1] for row in rows] == [line.split(" | ", 1)[1] for line in published]


def paragraphs(markdown: str) -> list[str]:
    """The report's prose paragraphs: blocks of lines that are not tables, lists, headings, figures or comments."""
    blocks = re.split(r"\n\s*\n", markdown)
    return [b for b in blocks if not b.lstrip().startswith(("|", "-", "#", "!", "<!--"))]


def test_the_report_reads_as_a_paper():
    report = (ROOT / "report.md").read_text(encoding="utf-8")
    assert len(report.encode("utf-8")) <= 36_000
    headings = [line for line in report.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Abstract" and re.fullmatch(r"## 1\. .+", headings[1])
    abstract = report.split("## Abstract\n", 1)[1].split("\n## ", 1)[0].strip()
    assert len(abstract.splitlines()) <= 10
    long = [p[:80] for p in paragraphs(report) if len(p) > 1_200]
    assert not long, f"paragraphs over 1,200 characters: {long}"
    for number, heading in enumerate(headings[1:], start=1):
        assert heading.startswith(f"## {number}. ")
    assert "Seeds 2 of" not in report and "(issue " not in report  # no chronology


def write_archive(root: Path, bench: dict | None = None) -> None:
    """A tiny archive: the short study's table (CSV), its groups and cost, and a benchmark."""
    folder = root / "report" / "multi30k"
    folder.mkdir(parents=True)
    header = ["scheme", "seeds", "parameters", "valid loss", "BLEU", "BLEU 95% CI", "chrF++", "TER", "p vs sinusoidal",
              "significant"]
    rows = [["rope", "3", "1", "2.7", "48.04 ± 0.17", "[46.34, 49.56]", "64.1", "36.1", "0.000", "yes"],
            ["alibi", "3", "1", "2.7", "45.12 ± 0.15", "[43.53, 46.62]", "61.0", "38.0", "0.001", "yes"],
            ["sinusoidal", "3", "1", "2.7", "43.66 ± 0.66", "[41.95, 45.33]", "60.0", "39.0", "—", "—"],
            ["cape", "3", "1", "2.7", "43.00 ± 0.37", "[41.13, 44.27]", "59.0", "40.0", "0.330", "no"],
            ["none", "3", "1", "2.7", "33.39 ± 0.24", "[31.95, 34.83]", "50.0", "50.0", "0.000", "yes"]]
    for testset in ("test_2016_flickr", "test_2017_flickr"):
        with (folder / f"comparison_{testset}.csv").open("w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows([header, *rows])
    versus = [header[:-2] + ["p vs rope", "significant"], rows[0][:-2] + ["—", "—"],
              rows[1][:-2] + ["0.004", "yes"], rows[3][:-2] + ["0.000", "yes"]]
    with (folder / "comparison_vs_rope_test_2016_flickr.csv").open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(versus)
    groups = [["scheme", "seeds", "BLEU", "group"], ["rope", "3", "48.04", "a"], ["alibi", "3", "45.12", "b"],
              ["sinusoidal", "3", "43.66", "bc"], ["cape", "3", "43.00", "c"], ["none", "3", "33.39", "d"], [],
              ["a", "b", "difference", "p", "p_holm", "significant"], ["rope", "alibi", "2.9", "0", "0", "yes"],
              ["alibi", "sinusoidal", "1.4", "0.1", "0.4", "no"]]
    with (folder / "groups_test_2016_flickr.csv").open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(groups)
    (folder / "cost.md").write_text("| device | runs | training hours | core-hours (CPU) / process-hours (GPU) | "
                                    "upper bounds |\n| --- | ---: | ---: | ---: | ---: |\n| CPU: x | 15 | 9.5 | 19.0 | 0 |\n"
                                    "| all | 15 | 9.5 | 19.0 | 0 |\n", encoding="utf-8")
    if bench is not None:
        (root / "report" / "bench").mkdir(parents=True)
        (root / "report" / "bench" / "bench.json").write_text(json.dumps(bench), encoding="utf-8")


BENCH = {"device": "CPU: test", "date": "2026-11-26", "train.torch_nn_transformer.step_ms": 900.0,
         "train.sinusoidal.step_ms": 600.0, "train.rope.step_ms": 660.0, "train.alibi.step_ms": 630.0,
         "train.none.step_ms": 540.0, "train.cape.step_ms": 750.0}


def test_placeholders_are_the_archives_values(tmp_path):
    write_archive(tmp_path, BENCH)
    expected = {"short.top": "`rope`", "short.top.bleu": "48.04", "short.bottom": "`none`", "short.rows": "5",
                "short.baseline.bleu": "43.66", "short.better": "`rope` and `alibi`", "short.better.count": "2",
                "short.worse": "`none`", "short.group_a": "`rope`", "short.sinusoidal.group": "`bc`",
                "short.alibi.rank": "2", "short.cape.bleu": "43.00", "short.pairs.different": "1",
                "short.pairs.total": "2", "short.runs": "15", "short.core_hours": "19.0", "short.seeds": "3",
                "short.spread": f"{(0.17 + 0.15 + 0.66 + 0.37 + 0.24) / 5:.2f}", "short.second.top.bleu": "48.04",
                "short.folder": "`report/multi30k/`", "name.corpus": "Multi30k",
                "bench.rope.cost": "1.10", "bench.slowest": "`cape`", "bench.slowest.cost": "1.25",
                "bench.fastest": "`none`", "bench.fastest.cost": "0.90", "bench.date": "2026-11-26",
                "short.alibi.p": "p = 0.001", "short.rope.p": "p < 0.001", "short.cape.p": "p = 0.330",
                "short.vs_rope.alibi.p": "p = 0.004", "short.vs_rope.cape.p": "p < 0.001",
                "short.vs_rope.baseline": "`rope`", "short.vs_rope.bottom.bleu": "43.00", "short.vs_rope.rows": "3"}
    for name, text in expected.items():
        assert value(tmp_path, name) == text, name
    assert expand(tmp_path, "Top: {{short.top}} ({{ short.top.bleu }}).\n", "x.md") == "Top: `rope` (48.04).\n"
    for bad, message in (("{{short.nothing}}", "unknown placeholder short.nothing"),
                         ("{{moon.top}}", "unknown placeholder moon.top"),
                         ("{{short.second.group_a}}", "no report/multi30k/groups_test_2017_flickr.csv"),
                         ("{{full.top}}", "report/multi30k-best-all/comparison_test_2016_flickr.md, which does not exist"),
                         ("{{short.sinusoidal.p}}", "`sinusoidal` is the baseline of that table"),
                         ("{{short.vs_rope.rope.p}}", "`rope` is the baseline of that table"),
                         ("{{short.vs_rope.group_a}}", "significance groups belong to the study's table"),
                         ("{{short.vs_kerple.top}}", "comparison_vs_kerple_test_2016_flickr.md, which does not exist"),
                         ("{{table moon}}", "table directive needs a study"),
                         ("{{figure moon}}", "unknown figure moon")):
        with pytest.raises(UserError) as err:
            expand(tmp_path, f"first line\n{bad}\n", "report/text/x.md")
        assert str(err.value).startswith("report/text/x.md:2: ") and message in str(err.value), str(err.value)


def test_the_shown_table_cuts_columns_and_joins_groups_and_training_cost(tmp_path):
    write_archive(tmp_path, BENCH)
    lines = comparison_table(tmp_path, "short", "test_2016_flickr").splitlines()
    assert lines[0] == ("| scheme | seeds | BLEU | BLEU 95% CI | chrF++ | TER | p vs sinusoidal | significant | group "
                        "| training time × |")
    assert lines[2] == "| rope | 3 | 48.04 ± 0.17 | [46.34, 49.56] | 64.1 | 36.1 | 0.000 | yes | a | 1.10 |"  # 660/600
    assert lines[4] == "| sinusoidal | 3 | 43.66 ± 0.66 | [41.95, 45.33] | 60.0 | 39.0 | — | — | bc | 1.00 |"
    assert len(lines) == 7
    head = comparison_table(tmp_path, "short", "test_2016_flickr", limit=2).splitlines()
    assert head == lines[:4]
    # no groups for the other test set, no benchmark: those columns are left out, not left empty
    (tmp_path / "report" / "bench" / "bench.json").unlink()
    plain = comparison_table(tmp_path, "short", "test_2017_flickr").splitlines()
    assert plain[0] == "| scheme | seeds | BLEU | BLEU 95% CI | chrF++ | TER | p vs sinusoidal | significant |"


def test_the_command_writes_report_and_readme_and_check_fails_when_stale(tmp_path, capsys):
    from nmt.report import main

    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "report", root / "report", ignore=shutil.ignore_patterns("*.png"))
    shutil.copytree(ROOT / "studies", root / "studies", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    shutil.copytree(ROOT / "configs", root / "configs")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (root / "README.md").write_text(readme.replace(readme_table(ROOT), README_MARKER + "\n| stale |\n"),
                                    encoding="utf-8")
    with pytest.raises(UserError, match="out of date with the archive: .*report.md, .*README.md; run python -m nmt report"):
        main(["--check", "--root", str(root)])
    main(["--root", str(root)])
    assert (root / "report.md").read_text(encoding="utf-8") == (ROOT / "report.md").read_text(encoding="utf-8")
    assert (root / "README.md").read_text(encoding="utf-8") == readme
    main(["--check", "--root", str(root)])
    assert capsys.readouterr().out.endswith("report.md and README's table match the archive\n")
    (root / "report" / "text" / "threats.md").write_text("## Threats\n\n{{short.moon}}\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"threats.md:3: unknown placeholder short.moon"):
        main(["--root", str(root)])
