"""Every command shown in README.md and docs/ still works as shown: each ``python``/``make`` line of
their shell blocks names an existing command, its flags parse, its ``key=value`` overrides are keys
the config schema knows (with values it accepts), and the files it names exist; the ``--help``
lines are run. README's head of the Multi30k table equals the archived table's top rows."""
from __future__ import annotations

import csv
import importlib
import re
import shlex
import subprocess
import sys

import pytest

import bench
from experiment.config import load_config
from nmt.__main__ import COMMANDS
from tests.conftest import ROOT
from utils.errors import UserError

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPTS = {"train.py": "train", "inference.py": "translate", "test.py": "test", "visualize.py": "visualize"}
INTERMIXED = {"train", "study"}  # commands that parse options and overrides in any order
# a command line (after any VAR=value), as opposed to the output shown beside it
COMMAND_START = re.compile(r"^([A-Z_][A-Z0-9_]*=\S*\s+)*(make|python3?|torchrun|\.venv/bin/)\b")


def shown_commands() -> list[tuple[str, str, str]]:
    """(page:line, command line, the error it is shown to end with or "") of every command in the
    pages' fenced shell blocks: a ``$ `` prompt dropped, continuations joined, comments cut, the
    part after a pipe taken."""
    found = []
    for page in PAGES:
        in_block, pending, start, last = False, "", 0, ""
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
            if line.startswith("```"):
                in_block = not in_block
                continue
            if not in_block:
                continue
            text = line.removeprefix("$ ")
            if pending:
                text, start = pending + " " + text.strip(), start
            else:
                start = number
            if text.endswith("\\"):
                pending = text[:-1].strip()
                continue
            pending = ""
            command = text.split("|")[-1].strip()
            if not COMMAND_START.match(command):
                if text.startswith("error: ") and found and found[-1][0] == last:
                    found[-1] = (*found[-1][:2], text.removeprefix("error: "))  # the error it is shown to end with
                continue  # output shown beside the commands
            words = shlex.split(command, comments=True)
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):  # VAR=value before the command
                words.pop(0)
            if words and (words[0] in ("make", "python", "python3", "torchrun") or words[0].startswith(".venv/bin/")):
                last = f"{page.relative_to(ROOT)}:{start}"
                found.append((last, " ".join(shlex.quote(w) for w in words), ""))
    return found


COMMAND_LINES = shown_commands()


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M))


def test_the_pages_show_commands():
    assert len(COMMAND_LINES) >= 25
    assert {where.split(":")[0] for where, _, _ in COMMAND_LINES} >= {"README.md", "docs/training.md", "docs/decoding.md"}


def resolve(words: list[str]) -> tuple[str, list[str]]:
    """(command name as in ``python -m nmt NAME`` or ``bench.TOOL``, its arguments)."""
    program = words[0].removeprefix(".venv/bin/")
    if program in ("torchrun",):
        words = [w for w in words[1:] if not w.startswith("--nproc")]
        program, words = "python", ["python", *words]
    assert program in ("python", "python3"), f"unknown program {words[0]}"
    if words[1] == "-m":
        module, rest = words[2], words[3:]
        if module == "nmt":
            assert rest and rest[0] in COMMANDS, f"no command {rest[:1]}"
            return rest[0], rest[1:]
        if module.startswith("bench."):
            assert module.removeprefix("bench.") in bench.TOOLS, f"no benchmark tool {module}"
            return module, rest
        if module == "studies":
            return "study", rest
        raise AssertionError(f"python -m {module} is not a command of this project")
    assert words[1] in SCRIPTS, f"no script {words[1]}"
    assert (ROOT / words[1]).is_file()
    return SCRIPTS[words[1]], words[2:]


@pytest.mark.parametrize("where,line,error", COMMAND_LINES, ids=[w for w, _, _ in COMMAND_LINES])
def test_a_shown_command_names_a_real_command_with_flags_that_parse(where, line, error):
    words = shlex.split(line)
    if words[0] == "make":
        assigned = [w.split("=", 1)[0] for w in words[1:] if re.fullmatch(r"[A-Z_]+=.*", w)]
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        assert all(f"$({name})" in makefile for name in assigned), f"{where}: make {assigned}: a variable it never reads"
        targets = {w for w in words[1:] if not re.fullmatch(r"[A-Z_]+=.*", w)}
        assert targets <= make_targets() | {"-n"}, f"{where}: make {words[1:]}: no such target"
        return
    words = [w for w in words if not (w.startswith("[") or w.endswith("]"))]  # [optional] parts of a synopsis
    if words[1:] == ["-m", "nmt", "--help"]:
        return  # run by the test below
    name, args = resolve(words)
    module = COMMANDS.get(name) or name
    parser = importlib.import_module(module).build_parser()
    if "--help" in args or "-h" in args:
        return  # run by the test below
    try:
        parsed = parser.parse_intermixed_args(args) if name in INTERMIXED else parser.parse_args(args)
    except SystemExit:
        pytest.fail(f"{where}: the flags of `{line}` do not parse")
    for flag in ("config", "src"):  # files named by the command must exist (runs/ are made by the user)
        path = getattr(parsed, flag, None)
        if path and not str(path).startswith(("runs/", "$", "FILE", "DIR")):
            assert (ROOT / path).is_file(), f"{where}: {path} does not exist"
    overrides = getattr(parsed, "overrides", None)
    config = getattr(parsed, "config", None)
    if name == "study" and parsed.study.startswith("runs/"):
        return  # a study file the user made (nmt scheme new writes one under runs/): nothing to load here
    if name == "study":  # study.KEY=VALUE sets the study's own keys: its loader checks them, the rest are the runs'
        from studies.catalog import HERE, load_study

        study = load_study(HERE / f"{parsed.study}.yaml", [o[len("study."):] for o in overrides if o.startswith("study.")])
        overrides = [o for o in overrides if not o.startswith("study.")]
        config = study.base_config
    if error:  # shown as a mistake: it must fail with the very line shown
        with pytest.raises(UserError) as raised:
            load_config(ROOT / config if config else None, overrides)
        assert str(raised.value) == error, where
    elif overrides:
        load_config(ROOT / config if config else None, overrides)  # an unknown key or bad value raises


HELP_LINES = [(where, line) for where, line, _ in COMMAND_LINES if "--help" in shlex.split(line)]


@pytest.mark.parametrize("where,line", HELP_LINES, ids=[w for w, _ in HELP_LINES])
def test_a_shown_help_command_runs(where, line):
    words = [sys.executable if w.endswith("python") else w for w in shlex.split(line)]
    result = subprocess.run(words, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("usage:"), f"{where}: {result.stderr[-500:]}"


def test_readme_shows_the_top_rows_of_the_archived_multi30k_table():
    """README's rows are the archived table's first rows (scheme, seeds, BLEU, interval, p, verdict
    cell for cell), read here from the archived Markdown, not through the report's generator."""
    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.strip().strip("|").split(" | ")]

    archived = (ROOT / "report" / "multi30k-short-h100" / "comparison_test_2016_flickr.md").read_text(encoding="utf-8")
    table = [cells(line) for line in archived.splitlines() if line.startswith("| ")]
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| scheme | seeds | BLEU |"))
    end = next(i for i in range(first, len(lines)) if not lines[i].startswith("| "))
    shown = [cells(line) for line in lines[first:end]]
    columns = ("scheme", "seeds", "BLEU", "BLEU 95% CI")
    picked = [table[0].index(name) for name in columns]
    mine = [shown[0].index(name) for name in columns]
    rows = shown[2:]
    assert len(rows) >= 5 and [[row[i] for i in mine] for row in rows] == [[row[i] for i in picked]
                                                                          for row in table[2:2 + len(rows)]], (
        "README's rows differ from report/multi30k-short-h100/comparison_test_2016_flickr.md: run python -m nmt report")
    # the tests shown are the declared family's against sinusoidal (Holm within it), read from its CSV
    with (ROOT / "report" / "multi30k-short-h100" / "family_vs-sinusoidal_test_2016_flickr.csv").open(encoding="utf-8") as f:
        family = {line["row"]: line for line in csv.DictReader(f)}
    tested = [shown[0].index(name) for name in ("Δ vs sinusoidal", "p (Holm) ± MC SE", "significant")]
    for row in rows:
        line = family.get(row[0])
        borderline = " (borderline)" if line and line["borderline"] == "yes" else ""
        assert [row[i] for i in tested] == ([line["difference"], f"{line['p_holm']} ± {line['p_holm_se']}",
                                             line["significant"] + borderline] if line else ["—", "—", "—"]), row[0]


def test_readme_is_a_front_page_and_dated_figures_live_in_performance_md():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for name in ("make demo", "make test", "![", "docs/configs.md", "report.md"):
        assert name in readme, name
    for page in PAGES:  # speed figures and their dates: docs/performance.md; quality figures: report.md
        if page.name != "performance.md":
            dated = re.findall(r"20\d\d-\d\d-\d\d", page.read_text(encoding="utf-8"))
            assert not dated, f"{page.relative_to(ROOT)}: a dated measurement ({dated[0]}) belongs in performance.md"


def test_the_demo_scores_shown_are_the_archived_demo_tables():
    """The figures ``test --run runs/demo/<scheme>`` is shown printing are that scheme's row of the
    demo's committed tables (report/demo-all/), not figures of some older run."""
    shown = re.findall(r"--run runs/demo/(\w+)\n((?:test\w*: BLEU [\d.]+ .*\n)+)",
                       (ROOT / "docs" / "decoding.md").read_text(encoding="utf-8"))
    assert shown
    for scheme, lines in shown:
        for testset, bleu, low, high in re.findall(r"(test\w*): BLEU ([\d.]+) \[([\d.]+), ([\d.]+)\]", lines):
            table = (ROOT / "report" / "demo-all" / f"comparison_{testset}.md").read_text(encoding="utf-8")
            row = next(line for line in table.splitlines() if line.startswith(f"| {scheme} |"))
            assert f"| {bleu} | [{low}, {high}] |" in row, (scheme, testset)
