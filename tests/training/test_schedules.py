"""Learning-rate schedules: the paper's inverse square root, linear/cosine decay, warm-up + exponential."""
from __future__ import annotations

import math

import pytest

from experiment.config import load_config
from training.schedules import lr_lambda
from utils.errors import ConfigError


def schedule(kind, *extra, steps_per_epoch=10):
    cfg = load_config(None, [f"train.schedule={kind}", "train.warmup_steps=100", "train.max_steps=1000",
                             "model.d_model=512", *extra])
    return lr_lambda(cfg, steps_per_epoch)


def test_inverse_sqrt_matches_the_paper():
    f = schedule("inverse_sqrt")
    for step in (1, 50, 100, 400, 999):
        assert f(step) == pytest.approx(512 ** -0.5 * min(step ** -0.5, step * 100 ** -1.5))
    assert max(range(1, 1000), key=f) == 100  # peak at the end of warm-up


def test_linear_and_cosine_warm_up_then_reach_zero():
    for kind in ("linear", "cosine"):
        f = schedule(kind)
        assert f(0) == 0 and f(50) == pytest.approx(0.5) and f(100) == pytest.approx(1.0)
        assert f(1000) == pytest.approx(0.0, abs=1e-9)
    assert schedule("cosine")(550) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5)))
    assert schedule("linear")(550) == pytest.approx(0.5)


def test_warmup_exp_decays_once_per_epoch():
    f = schedule("warmup_exp", "train.lr_decay=0.5", steps_per_epoch=200)
    assert f(100) == pytest.approx(1.0) and f(199) == pytest.approx(1.0)
    assert f(200) == pytest.approx(0.5) and f(450) == pytest.approx(0.25)


def test_decay_schedules_need_max_steps():
    with pytest.raises(ConfigError, match="max_steps"):
        schedule("cosine", "train.max_steps=0")
