"""A family's declared rows that have no runs yet (a scheme registered after the study's runs,
declared through ``rows: all``) are left out of its test, and its caption names them."""
from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from studies.catalog import Family, Variant
from studies.standing import rows_with_runs


def test_rows_without_runs_are_left_out_and_named(capsys):
    study = SimpleNamespace(name="s", families={}, added={}, variants={})  # no declared family: no standing of its own
    runs = [Path("a1"), Path("a2"), Path("b1"), Path("base")]
    labels = {Path("a1"): "a", Path("a2"): "a", Path("b1"): "b", Path("base"): "sinusoidal"}
    pairs = [("a", "sinusoidal"), ("new", "sinusoidal"), ("b", "sinusoidal")]
    tested, standing = rows_with_runs(study, "vs-sinusoidal", ["test"], pairs, labels, runs, [])
    assert tested == [("a", "sinusoidal"), ("b", "sinusoidal")]  # declaration order kept
    assert standing == "Also declared, without runs yet and so left out: `new` (1 hypothesis; Holm over the 2 tested)"
    assert "left out new (no runs yet)" in capsys.readouterr().out
    # an interaction needs the row in both studies
    other = [Path("x-b"), Path("x-base")]
    labels.update({Path("x-b"): "b", Path("x-base"): "sinusoidal"})
    tested, standing = rows_with_runs(study, "budget", ["test"], pairs, labels, runs, other)
    assert tested == [("b", "sinusoidal")] and "`a`, `new` (2 hypotheses; Holm over the 1 tested)" in standing
    # every row present: the pairs and the standing as they are
    assert rows_with_runs(study, "f", ["test"], pairs[:1], labels, runs, []) == (pairs[:1], "")


def test_rows_added_after_the_family_was_declared_are_named_with_their_hypotheses():
    """A row that joined the study (``added``) after the family's declaration: the caption names it, its
    variant's hypothesis counts with it, and a row added before the declaration is not named."""
    declared = datetime(2026, 11, 28, 2, 30, tzinfo=UTC)
    study = SimpleNamespace(name="s", families={"f": Family("f", (), declared)}, test_standing=None,
                            variants={"logn": Variant("logn", (), ())},
                            added={"late": datetime(2026, 11, 28, 17, tzinfo=UTC),
                                   "early": datetime(2026, 11, 27, tzinfo=UTC)})
    runs = [Path(n) for n in ("late", "early", "base", "late+logn")]
    labels = {r: r.name for r in runs}
    pairs = [("late", "base"), ("early", "base"), ("late+logn", "late")]
    tested, standing = rows_with_runs(study, "f", ["test"], pairs, labels, runs, [])
    assert tested == pairs
    note = standing.split(". ")[-1]
    assert note == ("Added later, after the family was declared: `late` (2026-11-28 17:00 UTC); Holm's m counts "
                    "their 2 hypotheses beside the 1 declared")
    assert "Confirmatory" in standing or "Exploratory" in standing  # the standing sentence stays first


def test_a_study_names_only_its_own_rows_as_added(tmp_path):
    from studies.catalog import load_study
    from utils.errors import ConfigError

    config = tmp_path / "c.yaml"
    config.write_text("model: {d_model: 32}\n")
    study = tmp_path / "s.yaml"
    study.write_text("config: c.yaml\nschemes: [rope, alibi]\nseeds: [1]\nout: runs/s\n"
                     "added: {alibi: 2026-11-28T17:00Z}\n")
    assert load_study(study).added == {"alibi": datetime(2026, 11, 28, 17, tzinfo=UTC)}
    study.write_text("config: c.yaml\nschemes: [rope]\nseeds: [1]\nout: runs/s\nadded: {alibi: 2026-11-28}\n")
    with pytest.raises(ConfigError, match="'added' names alibi, not rows of the study"):
        load_study(study)
    study.write_text("config: c.yaml\nschemes: [rope]\nseeds: [1]\nout: runs/s\nadded: {rope: yesterday}\n")
    with pytest.raises(ConfigError, match="added"):
        load_study(study)
