"""Bad input, as a user types it: one line on stderr starting with "error:" that names what is
wrong, exit code 2, no traceback, and no run directory left behind by a training that could not
start. Each row is a command line; ``{...}`` fields are filled from the tiny runs of conftest.py
and files this test writes."""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY

ROWS = [
    # model shape, checked before anything is written
    ("train", ["--config", "{config}", "--run-dir", "{new}", "model.n_heads=3"],
     "config key 'model.n_heads' in the command line must be a divisor of model.d_model (64), got 3"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "model.positional.name=t5",
               "model.positional.t5.num_buckets=2"],
     "config key 'model.positional.t5.num_buckets' in the command line must be at least 4, got 2"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "model.positional.name=rope", "model.d_model=36",
               "model.n_heads=4"], "even head size; 36 / 4 heads = 9"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "model.positional.name=xpos", "model.d_model=30",
               "model.n_heads=2"], "even head size; 30 / 2 heads = 15"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "model.d_model=0"], "'model.d_model' in the command line must be at least 1, got 0"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "model.d_model=-8"], "must be at least 1, got -8"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "model.positional.max_positions=0"], "max_positions"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "model.dropout=1.0"], "'model.dropout' in the command line must be in [0, 1)"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "train.lr=-1"], "'train.lr' in the command line must be 0 or more"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "train.max_tokens=0"], "'train.max_tokens'"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "decode.beam=0"], "'decode.beam'"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "decode.stopping=early"],
     "'decode.stopping' in the command line must be exact or first_k, got 'early'"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "model.positional.name=nope"], "'nope' is unknown; did you mean 'rope' or 'none'?"),
    ("train", ["--config", "{config}", "--run-dir", "{new}", "--threads", "0"], "--threads must be at least 1"),
    ("train", ["--config", "{config}", "--run-dir", "{stopped}"], "holds no checkpoint"),
    ("train", ["--average", "{empty_step}"], "not a checkpoint"),
    # decoding settings, resolved once at the command line
    ("test", ["--run", "{sin1}", "--beam", "0"], "error: --beam must be at least 1 (1: greedy), got 0"),
    ("test", ["--run", "{sin1}", "--beam", "-3"], "error: --beam must be at least 1 (1: greedy), got -3"),
    ("inference", ["--run", "{sin1}", "--beam", "0", "x"], "error: --beam must be at least 1 (1: greedy), got 0"),
    ("inference", ["--run", "{sin1}", "--nbest", "4", "x"], "error: --nbest must be between 1 and beam (3), got 4"),
    ("inference", ["--run", "{sin1}", "--beam", "2", "--nbest", "3", "x"], "error: --nbest must be between 1 and beam (2), got 3"),
    ("inference", ["--run", "{sin1}", "--nbest", "0", "x"], "error: --nbest must be between 1 and beam (3), got 0"),
    ("inference", ["--run", "{sin1}", "--batch-size", "0", "x"], "error: --batch-size must be at least 1, got 0"),
    ("inference", ["--run", "{sin1}", "--batch-size", "-1", "x"], "error: --batch-size must be at least 1, got -1"),
    ("inference", ["--run", "{sin1}", "--threads", "0", "x"], "--threads must be at least 1"),
    ("inference", ["--run", "{sin1}", "--device", "gpu", "x"], "unknown device 'gpu'"),
    ("inference", ["--run", "{sin1}", "--device", "cuda:99", "x"], "device 'cuda:99' asked for"),
    ("test", ["--run", "{sin1}", "--device", "tpu"], "unknown device 'tpu'"),
    # files
    ("test", ["--run", "{sin1}", "--src", "{empty_fr}", "--ref", "{empty_en}"], "test set 'empty' is empty"),
    ("inference", ["--run", "{sin1}", "--checkpoint", "{empty_pt}", "x"], "not a checkpoint: "),
    ("inference", ["--run", "{sin1}", "--checkpoint", "{text_pt}", "x"], "not a checkpoint: "),
    ("inference", ["--run", "{sin1}", "--checkpoint", "{rope_best}", "x"],
     "belongs to another model than"),
    ("visualize", ["attention", "--run", "{sin1}", "--text", "Je danse.", "--out", "/proc/x"], "cannot write picture /proc/x/"),
    # other engines
    ("inference", ["--run", "{sin1}", "--engine", "ctranslate2", "--compute-type", "float99", "x"],
     "CTranslate2 cannot load"),
]


@pytest.fixture(scope="module")
def files(runs, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bad")
    config = folder / "tiny.yaml"
    config.write_text(TINY.format(root=ROOT, cache=folder / "cache"), encoding="utf-8")
    stopped = folder / "stopped"  # a run directory left by a run that never reached a checkpoint
    stopped.mkdir()
    (stopped / "config.yaml").write_text((runs["sin1"] / "config.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    averaged = folder / "avg-run" / "checkpoints"
    averaged.mkdir(parents=True)
    (averaged / "step_00000010.pt").write_bytes(b"")
    (folder / "empty.fr").write_bytes(b"")
    with gzip.open(folder / "empty.en.gz", "wb"):
        pass
    (folder / "empty.pt").write_bytes(b"")
    (folder / "text.pt").write_text("not a checkpoint\n", encoding="utf-8")
    return {"config": config, "new": folder / "new-run", "stopped": stopped, "empty_step": averaged.parent,
            "empty_fr": folder / "empty.fr", "empty_en": folder / "empty.en.gz", "empty_pt": folder / "empty.pt",
            "text_pt": folder / "text.pt", "rope_best": runs["rope1"] / "checkpoints" / "best.pt",
            "sin1": runs["sin1"]}


@pytest.mark.parametrize("command,args,message", ROWS, ids=[" ".join(r[1][-3:]) for r in ROWS])
def test_bad_input_is_one_line_and_exit_2(files, command, args, message):
    argv = [a.format(**files) for a in args]
    proc = subprocess.run([sys.executable, f"{command}.py", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert message in lines[0], lines[0]
    assert not files["new"].exists()  # a training that could not start leaves no run directory
    assert not (files["stopped"] / "checkpoints").exists()


def test_sources_longer_than_the_position_limit_are_cut_with_a_warning(runs, tmp_path):
    src, ref = tmp_path / "long.fr", tmp_path / "long.en"
    src.write_text("Je danse.\n" + " ".join(["chat"] * 1100) + "\n", encoding="utf-8")
    ref.write_text("I dance.\ncat\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "test.py", "--run", str(runs["sin1"]), "--src", str(src), "--ref", str(ref)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "warning: 1 of 2 sources of 'long' are longer than 1023 subword tokens" in proc.stderr
    import json

    results = json.loads((runs["sin1"] / "eval" / "long" / "results.json").read_text(encoding="utf-8"))
    assert results["decode"]["cut_sources"] == 1
    shutil.rmtree(runs["sin1"] / "eval" / "long")


def test_written_files_follow_the_umask(runs):
    import os

    mask = os.umask(0)
    os.umask(mask)
    for path in (runs["sin1"] / "config.yaml", runs["sin1"] / "manifest.json", runs["sin1"] / "checkpoints" / "best.pt",
                 runs["sin1"] / "metrics.jsonl"):
        assert path.stat().st_mode & 0o777 == 0o666 & ~mask, f"{path}: {oct(path.stat().st_mode)}, umask {oct(mask)}"
