"""``nmt bench pins``: the environment that re-creates an archived run's pinned arithmetic is read from
its manifest (kernel set, MKL and oneDNN code paths), a run without pins is refused in one line, and
hypotheses are read from a run folder (``hyps.txt``) and an archive (``hyps.txt.gz``) alike."""
from __future__ import annotations

import gzip
import json

import pytest

from bench.arithmetic_pins import hypotheses, recorded_pins
from utils.errors import UserError


def test_the_pins_come_from_the_manifest_and_an_unpinned_run_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    manifest = {"cpu_kernels": "AVX2", "math_pins": {"MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert recorded_pins(run) == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    (run / "manifest.json").write_text(json.dumps({"cpu_kernels": "AVX512"}), encoding="utf-8")
    with pytest.raises(UserError, match=r"records no pinned arithmetic \(math_pins\); nothing to check$"):
        recorded_pins(run)


def test_hypotheses_are_read_plain_or_compressed(tmp_path):
    plain, packed = tmp_path / "plain" / "eval" / "test", tmp_path / "packed" / "eval" / "test"
    plain.mkdir(parents=True)
    packed.mkdir(parents=True)
    (plain / "hyps.txt").write_text("A cat.\nTwo dogs.\n", encoding="utf-8")
    (packed / "hyps.txt.gz").write_bytes(gzip.compress(b"A cat.\nTwo dogs.\n"))
    for folder in (plain, packed):
        (folder / "results.json").write_text("{}", encoding="utf-8")  # a tested run's record beside them
    assert hypotheses(tmp_path / "plain") == hypotheses(tmp_path / "packed") == {"test": ["A cat.", "Two dogs."]}
