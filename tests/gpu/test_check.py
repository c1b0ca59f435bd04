"""``make gpu-check`` (gpu/check.py) end to end on CPU, shrunk by config overrides: it
builds and trains each scheme as train.py does, checks, and prints each timed pass as a row."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

TINY = ["model.d_model=32", "model.n_heads=2", "model.n_encoder_layers=1", "model.n_decoder_layers=1",
        "model.d_ff=64", "tokenizer.vocab_size=300", "train.max_tokens=600", "train.lr=3e-3"]


@pytest.mark.parametrize("options", [[], ["train.static_shapes=true", "train.fused_optimizer=true",
                                          "train.cuda_graphs=true"],
                                     # learned rotary frequencies (parameters inside the rotation) through the same step
                                     ["model.positional.rope.learn_frequencies=true", "train.static_shapes=true",
                                      "train.cuda_graphs=true"],
                                     # SSMax's per-head scales and hybrid layers (the second of each stack NoPE)
                                     ["model.softmax=ssmax", "model.positional.nope_every=2", "model.n_encoder_layers=2",
                                      "model.n_decoder_layers=2", "train.static_shapes=true", "train.cuda_graphs=true"]])
def test_gpu_check_trains_checks_and_reports_each_pass_of_each_scheme(tmp_path, options):
    proc = subprocess.run([sys.executable, "-m", "nmt", "gpu", "check", "--schemes", "rope", "t5", "--batches", "4",
                           "--repeat", "2", "--train-pairs", "1500", "--device", "cpu",
                           f"data.cache_dir={tmp_path / 'cache'}", *TINY, *options],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "torch " in proc.stdout.splitlines()[0]  # the software versions
    assert "600-token batches" in proc.stdout and "30-epoch recipe" in proc.stdout  # read from the config
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in proc.stdout.splitlines()
            if line.startswith(("| rope |", "| t5 |"))]
    assert [(r[0], r[1]) for r in rows] == [("rope", "1"), ("rope", "2"), ("t5", "1"), ("t5", "2")]
    for cells in rows:
        assert cells[3] == "4"  # updates counted in the timed pass
        before, after = (float(x) for x in cells[7].split(" → "))
        assert after < before  # the held-out loss fell
        assert float(cells[2].replace(",", "")) > 0 and float(cells[4]) > 0
        if "train.static_shapes=true" in options:  # static shapes: a shape per rounded length, fewer than batches of distinct lengths
            assert 1 <= int(cells[5]) <= 4
    assert "all checks passed" in proc.stdout
