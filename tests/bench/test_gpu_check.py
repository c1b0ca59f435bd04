"""``make gpu-check`` (bench/gpu_check.py) end to end on CPU, shrunk by config overrides: it
trains each scheme with the project's trainer, checks, and prints its table."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

TINY = ["model.d_model=32", "model.n_heads=2", "model.n_encoder_layers=1", "model.n_decoder_layers=1",
        "model.d_ff=64", "tokenizer.vocab_size=300", "train.max_tokens=600", "train.lr=3e-3"]


def test_gpu_check_trains_checks_and_reports_each_scheme(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_check", "--schemes", "rope", "t5", "--updates", "6",
                           "--train-pairs", "1500", "--device", "cpu", f"data.cache_dir={tmp_path / 'cache'}", *TINY],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("| rope |", "| t5 |"))]
    assert len(rows) == 2
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        before, after = (float(x) for x in cells[4].split(" → "))
        assert after < before  # the held-out loss fell
        assert float(cells[1].replace(",", "")) > 0 and float(cells[5].replace(",", "")) > 0
    assert "all checks passed" in proc.stdout
