"""The studies declared as data (studies/<name>.yaml, studies/catalog.py): what a declaration
expands to, and one line naming the file and the key for each kind of bad declaration."""
from __future__ import annotations

from pathlib import Path

import pytest

import models.positional
from studies.catalog import ROOT, load_studies, load_study
from utils.errors import ConfigError

BASE = ROOT / "configs" / "synthetic" / "base.yaml"


def declare(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text.replace("BASE", str(BASE)), encoding="utf-8")
    return path


def test_all_is_the_registry_in_its_order_minus_the_excluded(tmp_path, monkeypatch):
    path = declare(tmp_path, "every", "base: BASE\nschemes: all\nexclude: [xl, rope]\nseeds: [1, 2]\nout: runs/every\n")
    study = load_study(path)
    assert study.schemes == [s for s in models.positional.SCHEMES if s not in ("xl", "rope")]
    assert (study.name, study.seeds, study.out, study.archive, study.base_config) == (
        "every", [1, 2], Path("runs/every"), None, BASE)
    # a scheme registered later is in every "all" study with no other edit
    monkeypatch.setitem(models.positional.SCHEMES, "toy", models.positional.SCHEMES["none"])
    assert load_study(path).schemes[-1] == "toy"


def test_a_declaration_lists_schemes_seeds_archive_and_the_attention_sentence(tmp_path):
    declare(tmp_path, "small", "base: BASE\nschemes: [t5, none]\nseeds: [3]\nout: runs/small\n"
                               "archive: report/small\nattention_text: Le chat dort.\n")
    declare(tmp_path, "other", "base: BASE\nschemes: [rope]\nseeds: [1]\nout: runs/other\n")
    studies = load_studies(tmp_path)
    assert list(studies) == ["other", "small"]
    small = studies["small"]
    assert (small.schemes, small.seeds, small.archive, small.attention_text) == (
        ["t5", "none"], [3], ROOT / "report" / "small", "Le chat dort.")
    assert small.config("t5", 3).model.positional.name == "t5" and small.config("t5", 3).seed == 3


@pytest.mark.parametrize("body,message", [
    ("base: BASE\nschemes: all\nseeds: [1]\nout: x\nseed: 2\n", "unknown key 'seed'"),
    ("base: BASE\nschemes: all\nout: x\n", "missing key 'seeds'"),
    ("base: BASE\nschemes: [rope, rotary]\nseeds: [1]\nout: x\n", "'schemes' names unknown scheme(s) rotary (known: "),
    ("base: BASE\nschemes: all\nexclude: xl\nseeds: [1]\nout: x\n", "'exclude' must be a list of scheme names, got 'xl'"),
    ("base: BASE\nschemes: all\nseeds: []\nout: x\n", "'seeds' must be a non-empty list of integers, got []"),
    ("base: BASE\nschemes: all\nseeds: [1, true]\nout: x\n", "'seeds' must be a non-empty list of integers, got [1, True]"),
    ("base: nowhere.yaml\nschemes: all\nseeds: [1]\nout: x\n", "'base' names nowhere.yaml, which is not a file"),
    ("- a list\n", "a study declaration is a mapping of "),
    ("base: BASE\nschemes: all\nseeds: [1]\nout: x\narchive: r\nranked_against: [a]\n", "'ranked_against' names another"),
    ("base: BASE\nschemes: all\nseeds: [1]\nout: x\nranked_against: other\n", "needs this study's 'archive'"),
    ("base: [unclosed\n", "cannot read the study declaration ("),
])
def test_a_bad_declaration_is_one_line_naming_the_file_and_the_key(tmp_path, body, message):
    path = declare(tmp_path, "bad", body)
    with pytest.raises(ConfigError) as err:
        load_study(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


def test_ranked_against_must_name_a_study_with_an_archive(tmp_path):
    declare(tmp_path, "short", "base: BASE\nschemes: all\nseeds: [1]\nout: runs/short\n")
    path = declare(tmp_path, "long", "base: BASE\nschemes: all\nseeds: [1]\nout: x\narchive: r\nranked_against: short\n")
    with pytest.raises(ConfigError, match=r"long.yaml: 'ranked_against' names 'short', which is not a study with an archive"):
        load_studies(tmp_path)
    declare(tmp_path, "short", "base: BASE\nschemes: all\nseeds: [1]\nout: runs/short\narchive: report/short\n")
    assert load_studies(tmp_path)["long"].ranked_against == "short" and load_study(path).ranked_against == "short"


def test_every_shipped_study_loads_and_each_of_its_runs_has_a_config():
    studies = load_studies()
    assert {"demo", "multi30k", "multi30k-extrapolation", "multi30k-best", "iwslt2017"} <= set(studies)
    for study in studies.values():
        assert study.base_config.is_file() and study.schemes and study.seeds
        for scheme in study.schemes:
            assert study.config(scheme, study.seeds[0]).model.positional.name == scheme
