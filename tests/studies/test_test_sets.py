"""A study's declared test sets (``test_sets:``): every run is tested on the primary sets, then the
secondary ones; its families are confirmatory on the primary sets alone, and only where the sets too
were declared before the first run; the confirmatory pair reads its confirmation on the fresh sets."""
from __future__ import annotations

import json

from studies.catalog import load_studies, load_study
from studies.standing import family_standing

STUDY = """config: {config}
schemes: [rope, sinusoidal]
seeds: [1]
out: out
families:
  f: {{baseline: sinusoidal, rows: [rope], declared: 2026-11-27T10:00Z}}
test_sets:
  primary: [fresh_a, fresh_b]
  secondary: [old]
  declared: {declared}
  why: the old set was read
    by every earlier study.
"""


def study_declaring(tmp_path, declared: str):
    config = tmp_path / "run.yaml"
    config.write_text("seed: 1\n", encoding="utf-8")
    path = tmp_path / "s.yaml"
    path.write_text(STUDY.format(config=config, declared=declared), encoding="utf-8")
    return load_study(path)


def run_started(tmp_path, when: str):
    run = tmp_path / "runs" / "rope"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"started": when}), encoding="utf-8")
    return [run]


def test_every_run_is_tested_on_the_primary_then_the_secondary_sets(tmp_path):
    study = study_declaring(tmp_path, "2026-11-27T10:00Z")
    assert study.config("rope", 1).data.test_splits == ["fresh_a", "fresh_b", "old"]
    assert study.test_standing.why == "the old set was read by every earlier study."
    assert study.test_standing.is_primary("fresh_b_concat4") and not study.test_standing.is_primary("old_concat4")
    # a test set a command line names instead replaces the declaration's (the recipe changes: un-archived)
    assert load_study(tmp_path / "s.yaml",
                      ["test_sets.primary=[old]", "test_sets.secondary=[]"]).config("rope", 1).data.test_splits == ["old"]


def test_a_family_is_confirmatory_on_the_primary_sets_and_exploratory_on_the_secondary(tmp_path):
    study = study_declaring(tmp_path, "2026-11-27T11:00Z")
    runs = run_started(tmp_path, "2026-11-27T12:00:00+00:00")
    on_fresh = family_standing(study, "f", runs, (), ["fresh_a"])
    # the later of the two declarations is the one that must precede the runs
    assert on_fresh == ("Confirmatory: declared 2026-11-27 11:00 UTC with its test sets (fresh_a), before the first "
                        "run (2026-11-27 12:00 UTC)")
    on_old = family_standing(study, "f", runs, (), ["old"])
    assert on_old.startswith("Exploratory: old is a secondary test set (the confirmatory tests are read on fresh_a, "
                             "fresh_b, declared 2026-11-27 11:00 UTC: the old set was read by every earlier study)")
    # a pooled table (the buckets of every split) holds a secondary set: exploratory
    assert family_standing(study, "f", runs, (), ["fresh_a", "old"]).startswith("Exploratory: old is a secondary")


def test_test_sets_fixed_after_the_first_run_make_every_set_exploratory(tmp_path):
    study = study_declaring(tmp_path, "2026-11-27T13:00Z")
    runs = run_started(tmp_path, "2026-11-27T12:00:00+00:00")
    assert family_standing(study, "f", runs, (), ["fresh_a"]).startswith(
        "Exploratory: declared 2026-11-27 13:00 UTC with its test sets (fresh_a), after the first run")


def test_the_confirmatory_pair_reads_its_confirmation_on_the_fresh_sets():
    """multi30k-full and multi30k-short: test_2017_mscoco and test_2018_flickr primary (no earlier study
    read them), the two Flickr sets every earlier study read secondary; no study before them tests on
    the fresh sets, and every family stays confirmatory on them (no run yet, or declared before the first)."""
    studies = load_studies()
    fresh = ("test_2017_mscoco", "test_2018_flickr")
    for name in ("multi30k-full", "multi30k-short"):
        study = studies[name]
        assert study.test_standing.primary == fresh
        assert study.test_standing.secondary == ("test_2016_flickr", "test_2017_flickr")
        for family in study.families:
            standing = family_standing(study, family, [], (), [fresh[0]])
            assert standing.startswith("Confirmatory"), (name, family, standing)
    others = [n for n, s in studies.items() if n not in ("multi30k-full", "multi30k-short") and s.archive is not None]
    for name in others:
        splits = studies[name].config(studies[name].schemes[0], studies[name].seeds[0]).data.test_splits
        assert not set(fresh) & set(splits), name
