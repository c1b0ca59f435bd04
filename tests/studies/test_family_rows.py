"""A family's declared rows that have no runs yet (a scheme registered after the study's runs,
declared through ``rows: all``) are left out of its test, and its caption names them."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from studies.tables import rows_with_runs


def test_rows_without_runs_are_left_out_and_named(capsys):
    study = SimpleNamespace(name="s", declared={})  # no declared time: no standing sentence of its own
    runs = [Path("a1"), Path("a2"), Path("b1"), Path("base")]
    labels = {Path("a1"): "a", Path("a2"): "a", Path("b1"): "b", Path("base"): "sinusoidal"}
    pairs = [("a", "sinusoidal"), ("new", "sinusoidal"), ("b", "sinusoidal")]
    tested, standing = rows_with_runs(study, "vs-sinusoidal", "test", pairs, labels, runs, [])
    assert tested == [("a", "sinusoidal"), ("b", "sinusoidal")]  # declaration order kept
    assert standing == "Also declared, without runs yet and so left out: `new` (1 hypothesis; Holm over the 2 tested)"
    assert "left out new (no runs yet)" in capsys.readouterr().out
    # an interaction needs the row in both studies
    other = [Path("x-b"), Path("x-base")]
    labels.update({Path("x-b"): "b", Path("x-base"): "sinusoidal"})
    tested, standing = rows_with_runs(study, "budget", "test", pairs, labels, runs, other)
    assert tested == [("b", "sinusoidal")] and "`a`, `new` (2 hypotheses; Holm over the 1 tested)" in standing
    # every row present: the pairs and the standing as they are
    assert rows_with_runs(study, "f", "test", pairs[:1], labels, runs, []) == (pairs[:1], "")
