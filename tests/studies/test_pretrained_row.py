"""A study row of a `transformers` Marian folder (``rows: {opus-mt: {pretrained: DIR}}``): never trained,
decoded with the study's test sets and decoding beside the trained rows, archived and tabled as a row;
its hypotheses are the ones `transformers`' own ``generate`` gives with the same settings."""
from __future__ import annotations

import contextlib
import io
import json

import pytest
import torch
import yaml

from data.synthetic import generate_pairs
from studies.catalog import load_study
from studies.driver import run_study
from tests.conftest import ROOT, TINY
from tests.experiment.test_marian import generated, make_marian
from utils.errors import ConfigError

STUDY = """config: configs/base.yaml
rows:
  sinusoidal: {{scheme: sinusoidal}}
  opus-mt: {{pretrained: models/opus-mt-tiny}}
seeds: [1]
overrides: [train.max_steps=20, train.eval_every=10, decode.len_penalty=0, decode.stopping=first_k]
out: {out}/runs
archive: {out}/archive
"""


@pytest.fixture(scope="module")
def studied(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pretrained")
    (folder / "configs").mkdir()
    (folder / "configs" / "base.yaml").write_text(TINY.format(root=ROOT, cache=folder / "cache"), encoding="utf-8")
    sources, targets = generate_pairs(300, 3, 9, seed=0)
    make_marian(folder / "models" / "opus-mt-tiny", sources + targets)
    (folder / "tiny.yaml").write_text(STUDY.format(out=folder), encoding="utf-8")
    study = load_study(folder / "tiny.yaml")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_study(study)
    return study, folder, printed.getvalue()


def test_the_row_is_declared_relative_to_the_study_file_and_never_trained(studied):
    study, folder, out = studied
    row = study.row("opus-mt")
    assert (row.pretrained, row.scheme, row.seeds) == ((folder / "models" / "opus-mt-tiny").resolve(), "sinusoidal",
                                                       (1,))
    run_dir = study.out / "opus-mt"
    assert not (run_dir / "checkpoints").exists() and not (run_dir / "manifest.json").exists()
    assert "opus-mt: the pretrained model of" in out and "opus-mt: trained in" not in out
    assert "1 trained, 1 kept" in out  # the trained row alone counts as a training
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    # the Marian architecture in the study's config: its data, test sets and decoding
    assert (config["model"]["activation"], config["model"]["d_model"], config["tokenizer"]["type"]) == ("silu", 32,
                                                                                                      "pretrained")
    assert config["data"]["test_splits"] == ["test"] and config["decode"]["beam"] == 3


def test_its_hypotheses_are_transformers_own_under_the_studys_decoding(studied):
    from experiment.marian import load_marian
    from search.greedy import max_lengths

    study, folder, _ = studied
    run_dir = study.out / "opus-mt"
    record = json.loads((run_dir / "eval" / "test" / "results.json").read_text(encoding="utf-8"))
    assert record["n_sentences"] == 30 and record["decode"]["beam"] == 3
    sources = (run_dir / "eval" / "test" / "srcs.txt").read_text(encoding="utf-8").splitlines()
    run = load_marian(run_dir, "cpu", base=study.config("opus-mt", 1))
    ids = run.tokenizer.encode_src(sources)
    limits = max_lengths(torch.tensor([len(s) + 1 for s in ids]), run.cfg.decode.max_len_a,
                         run.cfg.decode.max_len_b).tolist()
    ours = (run_dir / "eval" / "test" / "hyps.txt").read_text(encoding="utf-8").splitlines()
    assert len(set(ours)) >= 15 and ours == generated(folder / "models" / "opus-mt-tiny", sources, limits, beam=3)


def test_it_is_archived_and_tabled_beside_the_trained_row(studied):
    study, _, _ = studied
    archived = study.archive / "opus-mt"
    assert {p.name for p in archived.iterdir()} == {"config.json", "config.yaml", "eval"}  # no weights
    table = (study.archive / "comparison_test.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    record = json.loads((study.out / "opus-mt" / "eval" / "test" / "results.json").read_text(encoding="utf-8"))
    assert f"| {record['bleu']:.2f} |" in rows["opus-mt"] and "sinusoidal" in rows  # the study's label of the row
    assert table.rstrip().endswith("Trained outside the suite (transformers Marian models) and decoded here: opus-mt.")


@pytest.mark.parametrize("row, words", [("{pretrained: models/not-marian}", "holds no transformers Marian model"),
                                        ("{pretrained: models/m, scheme: rope}", "'rows.opus.scheme'"),
                                        ("{pretrained: models/m, seeds: [1, 2]}", "'rows.opus.seeds'")])
def test_a_pretrained_row_that_cannot_be_is_refused_in_one_line(tmp_path, row, words):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "base.yaml").write_text("seed: 1\n", encoding="utf-8")
    (tmp_path / "models" / "not-marian").mkdir(parents=True)
    (tmp_path / "models" / "not-marian" / "config.json").write_text('{"model_type": "bart"}', encoding="utf-8")
    (tmp_path / "s.yaml").write_text(f"config: configs/base.yaml\nrows:\n  opus: {row}\nseeds: [1]\nout: runs/s\n",
                                     encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_study(tmp_path / "s.yaml")
    assert len(str(error.value).splitlines()) == 1 and words in str(error.value)
