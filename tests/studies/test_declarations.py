"""A study's stated times read with its file's history (``studies.declarations``): a family, the
pre-registration or the test sets count as declared from the first commit that holds them, and a
``declared:`` earlier than that commit is refused in one line, here on a git history the test makes."""
from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from studies.catalog import load_studies, load_study
from studies.declarations import check_declared_times, first_commits, late_declarations
from tests.conftest import ROOT
from utils.errors import ConfigError

STUDY = ("config: run.yaml\nschemes: [sinusoidal, rope]\nseeds: [1]\nout: out\n"
         "families:\n  vs-sinusoidal: {{baseline: sinusoidal, rows: all, declared: {declared}}}\n")


def git(folder: Path, *args: str, when: str = "2026-11-28T12:00:00Z") -> str:
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(folder), *args], env=env, check=True, capture_output=True,
                          text=True).stdout


def committed_study(folder: Path, declared: str, when: str = "2026-11-28T12:00:00Z") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q")
    (folder / "run.yaml").write_text("seed: 1\n", encoding="utf-8")
    path = folder / "s.yaml"
    path.write_text(STUDY.format(declared=declared), encoding="utf-8")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "declare", when=when)
    return path


def test_a_family_declared_before_the_commit_that_first_holds_it_is_refused_in_one_line(tmp_path):
    path = committed_study(tmp_path / "repo", "2026-11-28T09:00Z")  # three hours before its commit
    study = load_study(path)
    [(declaration, commit)] = late_declarations(study.declarations)
    assert declaration.key == "families.vs-sinusoidal" and commit.when == datetime(2026, 11, 28, 12, tzinfo=UTC)
    with pytest.raises(ConfigError) as err:
        check_declared_times(study)
    message = str(err.value)
    assert "\n" not in message and str(path.resolve()) in message
    assert "'families.vs-sinusoidal.declared' 2026-11-28 09:00:00 UTC is earlier than the commit that first holds it" in message
    assert "2026-11-28 12:00:00 UTC" in message


def test_the_commit_dates_the_family_not_a_later_edit_of_its_time(tmp_path):
    """A family first committed at 12:00 and later re-dated (a second commit) is still dated by the
    first commit: a time stated after it passes, one before it is refused, whatever commit wrote it."""
    path = committed_study(tmp_path / "repo", "2026-11-28T12:00Z")
    assert late_declarations(load_study(path).declarations) == []  # the commit's own minute
    path.write_text(STUDY.format(declared="2026-11-28T11:00Z"), encoding="utf-8")
    git(path.parent, "commit", "-qam", "re-date", when="2026-11-29T08:00:00Z")
    [(_, commit)] = late_declarations(load_study(path).declarations)
    assert commit.when == datetime(2026, 11, 28, 12, tzinfo=UTC)


def test_a_family_not_committed_yet_or_outside_a_history_is_not_refused(tmp_path):
    path = committed_study(tmp_path / "repo", "2026-11-28T12:00Z")
    path.write_text(STUDY.format(declared="2026-11-28T12:00Z") +
                    "  papers: {pairs: [rope vs sinusoidal], declared: 2026-01-01}\n", encoding="utf-8")
    assert set(first_commits(path.resolve())) == {"families.vs-sinusoidal"}  # papers: in no commit yet
    check_declared_times(load_study(path))
    outside = tmp_path / "plain"
    outside.mkdir()
    (outside / "run.yaml").write_text("seed: 1\n", encoding="utf-8")
    (outside / "s.yaml").write_text(STUDY.format(declared="2026-01-01"), encoding="utf-8")
    assert first_commits((outside / "s.yaml").resolve()) == {}
    check_declared_times(load_study(outside / "s.yaml"))


def test_a_shallow_clone_reads_no_history_rather_than_a_cut_one(tmp_path):
    """Its oldest commit is a later one: every section would look younger than it is."""
    path = committed_study(tmp_path / "repo", "2026-11-28T12:00Z")
    (path.parent / "other.txt").write_text("x\n", encoding="utf-8")
    git(path.parent, "add", "-A")
    git(path.parent, "commit", "-qm", "later", when="2026-11-30T00:00:00Z")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{path.parent}", str(clone)], check=True)
    assert first_commits((path.parent / "s.yaml").resolve())["families.vs-sinusoidal"].when.day == 28
    assert first_commits((clone / "s.yaml").resolve()) == {}


def test_every_shipped_declaration_is_no_earlier_than_the_commit_that_first_holds_it():
    if git(ROOT, "rev-parse", "--is-shallow-repository").strip() != "false":
        pytest.skip("a shallow clone holds no history to read the declarations against")
    late = [(name, declaration.key, commit.sha[:10]) for name, study in load_studies().items()
            for declaration, commit in late_declarations(study.declarations)]
    assert late == []
