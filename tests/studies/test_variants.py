"""A study's evaluation variants (``eval_variants``): each trained run decoded again under a
test-time setting into ``<run>+<variant>``, archived beside it, shown as row ``<row>+<variant>`` in
every table and family (the all-pairs groups aside), never counted as a training, and part of what makes a run done."""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil

import pytest
import sacrebleu
import yaml

from gpu.queue import Entry, Pending, pending_runs
from studies.catalog import Family, Study, Variant, declared_at
from studies.driver import run_study
from studies.runs import label_of, queue, variant_of
from studies.tables import write_archive_tables
from tests.studies.test_experiments import make_study

ORACLE = {"oracle": Variant("oracle", ("decode.oracle_length=true",), ("sinusoidal", "alibi")),
          "logn": Variant("logn", ("model.length_scaling.logn=true",), ("alibi",))}
FAMILY = {"vs-sinusoidal": Family("vs-sinusoidal", (("alibi", "sinusoidal"), ("sinusoidal+oracle", "sinusoidal"),
                                                    ("alibi+oracle", "sinusoidal")), declared_at("2026-11-28"))}


@pytest.fixture(scope="module")
def studied(tmp_path_factory) -> tuple[Study, str]:
    study = dataclasses.replace(make_study(tmp_path_factory.mktemp("variants")), variants=ORACLE, families=FAMILY)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_study(study)
    return study, printed.getvalue()


def rows_of(table) -> dict[str, list[str]]:
    lines = [line.strip("| ").split(" | ") for line in table.read_text(encoding="utf-8").splitlines()
             if line.startswith("| ") and "---" not in line]
    return {row[0]: row for row in lines[1:]}


def test_each_run_is_decoded_again_under_the_variant_and_archived_beside_it(studied):
    study, out = studied
    for scheme in ("sinusoidal", "alibi"):
        for folder in (study.out / f"{scheme}+oracle", study.archive / f"{scheme}+oracle"):
            config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
            assert config["decode"]["oracle_length"] is True and config["model"]["positional"]["name"] == scheme
            assert (folder / "manifest.json").read_bytes() == (study.out / scheme / "manifest.json").read_bytes()
        record = json.loads((study.out / f"{scheme}+oracle" / "eval" / "test" / "results.json").read_text())
        assert record["variant"] == "oracle" and record["decode"]["oracle_length"] is True
        plain = json.loads((study.out / scheme / "eval" / "test" / "results.json").read_text())
        assert plain["variant"] is None and "oracle_length" not in plain["decode"]
        assert not (study.out / f"{scheme}+oracle" / "checkpoints").exists()  # the run's weights, not a copy
        assert (study.archive / f"{scheme}+oracle" / "eval" / "test" / "hyps.txt.gz").is_file()
    assert "[oracle] test: BLEU" in out
    # a test-time model setting: the run's training lengths come from its manifest
    longest = json.loads((study.out / "alibi" / "manifest.json").read_text())["longest_training_tokens"]
    scaling = yaml.safe_load((study.archive / "alibi+logn" / "config.yaml").read_text())["model"]["length_scaling"]
    assert {key: scaling[key] for key in ("logn", "rotary", "train_source_tokens", "train_target_tokens")} == {
        "logn": True, "rotary": "none", "train_source_tokens": longest["source"], "train_target_tokens": longest["target"]}
    assert not (study.archive / "sinusoidal+logn").exists()  # declared for alibi only
    assert label_of(study.out / "alibi-seed2+oracle") == "alibi+oracle" and variant_of(study.out / "alibi") is None


def test_the_variant_is_a_row_of_every_table_and_family_and_not_a_training(studied):
    study, _ = studied
    for folder in (study.out, study.archive):
        rows = rows_of(folder / "comparison_test.md")
        assert set(rows) == {"sinusoidal", "alibi", "sinusoidal+oracle", "alibi+oracle", "alibi+logn"}
        refs = (study.out / "alibi" / "eval" / "test" / "refs.txt").read_text(encoding="utf-8").splitlines()
        hyps = (study.out / "alibi+oracle" / "eval" / "test" / "hyps.txt").read_text(encoding="utf-8").splitlines()
        assert rows["alibi+oracle"][4] == f"{sacrebleu.corpus_bleu(hyps, [refs]).score:.2f}"
        assert rows["sinusoidal"][-2] == "—"  # the baseline is the plain sinusoidal row, not its variant
    assert (study.out / "comparison_test.md").read_bytes() == (study.archive / "comparison_test.md").read_bytes()
    family = rows_of(study.archive / "family_vs-sinusoidal_test.md")  # the tables are made once, in the archive
    assert set(family) == {"alibi", "sinusoidal+oracle", "alibi+oracle"}
    assert all(row[1] == "sinusoidal" for row in family.values())
    cost = (study.archive / "cost.md").read_text(encoding="utf-8")
    assert "| all | 2 |" in cost  # two trainings; the variants' decodes are not runs
    # the all-pairs letters: the trained rows alone (a variant is tested against its own row in its family)
    assert set(rows_of(study.archive / "groups_test.md")) == {"sinusoidal", "alibi"}


def test_a_second_start_keeps_runs_and_variants_and_the_archive_alone_remakes_the_tables(studied, tmp_path, capsys):
    study, _ = studied
    mtimes = {p: p.stat().st_mtime_ns for p in study.out.glob("*+oracle/eval/*/results.json")}
    run_study(study)
    assert "2 runs: 0 trained, 2 kept" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes  # not decoded again
    alone = dataclasses.replace(study, out=tmp_path / "none", archive=tmp_path / "archive")
    shutil.copytree(study.archive, alone.archive)
    made = {p.name: p.read_bytes() for p in alone.archive.glob("*.md")}
    for table in alone.archive.glob("*.md"):
        table.unlink()
    with contextlib.redirect_stdout(io.StringIO()):
        write_archive_tables(alone, studies={})
    assert {p.name: p.read_bytes() for p in alone.archive.glob("*.md")} == made


def test_a_run_whose_variant_is_not_archived_is_still_pending(studied, tmp_path):
    study, _ = studied
    copy = dataclasses.replace(study, archive=tmp_path / "archive", out=tmp_path / "out")
    shutil.copytree(study.archive, copy.archive)
    entry = Entry(copy, tuple(queue(copy)), "")
    assert pending_runs(entry) == []
    shutil.rmtree(copy.archive / "alibi+oracle")
    assert pending_runs(entry) == [Pending("alibi", 1, 0)]
