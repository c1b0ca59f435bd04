"""``nmt bench generate-speed`` on a small model: every case runs and keeps its output length, and each
ratio is the case's rate over the suite's own search in the same search (the reference)."""
from __future__ import annotations

import math

from bench.generate_speed import measure
from experiment.config import load_config


def test_each_generate_case_is_reported_against_the_suites_search_of_the_same_kind():
    small = load_config(None, ["model.d_model=32", "model.d_ff=64", "model.n_heads=4", "model.n_encoder_layers=1",
                               "model.n_decoder_layers=1"]).model
    m = measure(repeats=1, threads=1, tokens=3, model_config=small)
    rates = {f"{who}_{search}" for who in ("suite", "generate_cached", "generate_uncached") for search in ("greedy", "beam5")}
    ratios = {f"generate_{how}_{search}_ratio" for how in ("cached", "uncached") for search in ("greedy", "beam5")}
    assert set(m) == rates | ratios
    assert all(math.isfinite(m[name]) and m[name] > 0 for name in rates)
    for name in ratios:
        case = name.removesuffix("_ratio")
        assert math.isclose(m[name], m[case] / m[f"suite_{case.rsplit('_', 1)[1]}"])
