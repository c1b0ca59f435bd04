"""The pre-registered synthetic length study (studies/synthetic-length.yaml) and its control
(synthetic-length-control.yaml): what the files declare resolves to the rows, seeds, variants and
families the issue names; the test sets have the declared lengths and are the same sentences on both
sides of the gap; a pre-registration that names an undeclared row, or lacks its primary endpoint, is
one line naming the key."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from data.corpus import load_corpus
from experiment.manifest import read_manifest
from models.positional import SCHEMES
from studies.catalog import ROOT, load_studies, load_study
from utils.errors import ConfigError

ROTARY_ROWS = {"rope", "xpos", "p_rope", "polar", "hope"}
ROWS_2026 = {"rope-learned", "hope", "fope-clip", "rope-ssmax", "sinusoidal-ssmax", "alibi-ssmax", "hybrid-nope-rope"}
SSMAX_ROWS = {"rope-ssmax", "sinusoidal-ssmax", "alibi-ssmax"}


@pytest.fixture(scope="module")
def studies():
    found = load_studies()
    return found["synthetic-length"], found["synthetic-length-control"]


def test_every_registered_scheme_the_shaw_clips_and_the_2026_rows_five_seeds_each(studies):
    study, _ = studies
    assert set(study.schemes) == set(SCHEMES) | {"shaw-clip4", "shaw-clip64"} | ROWS_2026
    assert all(study.seeds_of(label) == [1, 2, 3, 4, 5] for label in study.schemes)
    clips = {label: study.config(label, 1).model.positional.shaw.max_distance for label in ("shaw-clip4", "shaw",
                                                                                             "shaw-clip64")}
    assert clips == {"shaw-clip4": 4, "shaw": 16, "shaw-clip64": 64}


def test_the_variants_are_multi30k_lengths_oracle_logn_and_rotary_settings(studies):
    study, _ = studies
    rows = {name: set(variant.rows) for name, variant in study.variants.items()}
    assert rows["oracle"] == set(study.schemes)
    assert rows["logn"] == set(study.schemes) - SSMAX_ROWS  # SSMax already scales its logits by ln n
    assert rows["pi"] == rows["ntk"] == rows["yarn"] == ROTARY_ROWS
    assert study.variant_config("hope", 1, "yarn").model.length_scaling.rotary == "yarn"


def test_the_primary_family_is_each_schemes_gap_against_sinusoidals_through_the_control(studies):
    study, control = studies
    assert {f.name: f.interaction for f in study.families.values() if f.interaction} == {
        "gap-vs-sinusoidal": "synthetic-length-control"}
    assert set(study.families["gap-vs-sinusoidal"].pairs) == {(s, "sinusoidal") for s in SCHEMES if s != "sinusoidal"}
    assert set(control.schemes) == set(SCHEMES) and control.seeds == [1, 2, 3]
    plain = {label for label in study.schemes if label != "sinusoidal"}
    assert {row for row, _ in study.families["vs-sinusoidal"].pairs} == plain  # the variants have families of their own
    assert set(study.families["schemes-2026"].pairs) >= {("hope", "rope"), ("sinusoidal-ssmax", "sinusoidal")}
    assert study.preregistration.primary and study.preregistration.expectations.source == "demo-all"
    # every family and the pre-registration declared at one time, the control's too
    assert len({f.declared for f in [*study.families.values(), *control.families.values()]}) == 1
    assert study.preregistration.declared == "2026-11-29T06:00Z"


def test_training_and_test_lengths_are_as_declared_and_both_studies_test_the_same_sentences(studies):
    study, control = studies
    short, every = study.config("sinusoidal", 1).data, control.config("sinusoidal", 1).data
    words = {name: sorted(len(s.split()) for s in split.src)
             for name, split in load_corpus(short, ["validation", "test", "test_long"]).items()}
    assert (len(words["test"]), words["test"][0], words["test"][-1]) == (500, 3, 12)
    assert (len(words["test_long"]), words["test_long"][0], words["test_long"][-1]) == (800, 13, 48)
    assert words["validation"][-1] <= 12
    in_bucket = sum(13 <= n <= 24 for n in words["test_long"]), sum(25 <= n <= 48 for n in words["test_long"])
    assert min(in_bucket) >= 200  # both long buckets hold a few hundred sentences
    mine, theirs = load_corpus(short, ["test", "test_long"]), load_corpus(every, ["test", "test_long", "train"])
    assert all(mine[name].src == theirs[name].src and mine[name].tgt == theirs[name].tgt for name in mine)
    assert max(len(s.split()) for s in theirs["train"].src) == 48  # the control trains on every tested length
    assert short.synthetic["train"].max_words == 12 and every.synthetic["train"].max_words == 48


def test_hope_and_fope_clip_take_the_longest_training_source_of_every_archived_run(studies):
    """L (train_length) is declared as the grammar's longest training source in tokens; each archived run's
    manifest records that length as its tokenizer cut it (tokenizers differ by seed)."""
    study, _ = studies
    lengths = {study.config(label, 1).model.positional.p_rope.train_length if label == "hope" else
               study.config(label, 1).model.positional.fope.train_length for label in ("hope", "fope-clip")}
    runs = [run for run in sorted(study.archive.glob("*")) if (run / "manifest.json").is_file() and "+" not in run.name]
    assert runs, "the archive holds the study's runs (report/synthetic-length)"
    longest = {read_manifest(run).longest_training_tokens["source"] for run in runs}
    assert lengths == longest == {28}


PREFIX = ("config: CONFIG\nschemes: [sinusoidal, rope, alibi]\nseeds: [1]\nout: x\n"
          "families: {f: {baseline: sinusoidal, rows: all, declared: 2026-11-29T06:00Z}}\n")


@pytest.mark.parametrize(("body", "message"), [
    ("preregistration: {declared: 2026-11-29T06:00Z, primary: [gap], expectations: {source: demo-all, "
     "baseline: sinusoidal, test_set: test_long, lead: [xl]}}\n",
     "{path}: 'preregistration.expectations' names xl, not rows of the study (rows: sinusoidal, rope, alibi)"),
    ("preregistration: {declared: 2026-11-29T06:00Z, primary: []}\n",
     "'preregistration.primary' in {path} must be a non-empty list of the primary endpoints"),
    ("preregistration: {declared: yesterday, primary: [gap]}\n", "'preregistration.declared' in {path} must be"),
    ("preregistration: {declared: 2026-11-29T06:00Z, primary: [gap], expectations: {source: demo-all, "
     "baseline: sinusoidal, test_set: test_long, lead: [rope], trail: [rope]}}\n",
     "'preregistration.expectations.lead' in {path} must be rows not also in 'trail' (both: rope)"),
    ("preregistration: {declared: 2026-11-29T06:00Z, primary: [gap], endpoints: [x]}\n",
     "unknown config key 'preregistration.endpoints' in {path}"),
    ("families: {g: {pairs: [xl vs rope], declared: 2026-11-29T06:00Z}}\n",
     "{path}: 'families.g' names 'xl', not a row of the study (rows: sinusoidal, rope, alibi)"),
])
def test_a_bad_preregistration_or_family_is_one_line_naming_the_key(tmp_path, body, message):
    config = ROOT / "configs" / "synthetic" / "length.yaml"
    text = PREFIX.replace("CONFIG", str(config))
    if body.startswith("families"):
        text = text.split("families")[0]
    path = tmp_path / "bad.yaml"
    path.write_text(text + body, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_study(path)
    said = re.sub(rf"({re.escape(str(path))}):\d+", r"\1", str(err.value))
    assert message.format(path=path) in said and "\n" not in said


def test_the_shipped_files_name_only_declared_rows_in_their_expectations():
    study = load_study(Path(ROOT / "studies" / "synthetic-length.yaml"))
    expectations = study.preregistration.expectations
    assert set(expectations.lead) == {"xl", "kerple", "alibi", "shaw"}
    assert {"none", "t5", "randomized"} <= set(expectations.trail) and expectations.baseline in study.schemes
