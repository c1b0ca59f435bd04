"""The real training loop against the bare update on the same batches: the loop's overhead.

The loop is what train.py runs per update: the DataLoader (token-budget batch sampler and
collator over a Multi30k-shaped split, ``train.max_tokens`` = 4096), the ignite trainer of
``training.engine`` (forward, fused loss, non-finite check, backward, gradient norm, optimizer
and scheduler step) and the per-update handlers (``ThroughputLogger`` writing metrics.jsonl and
TensorBoard every ``train.log_every`` updates, ``StepBudget``). Validation and checkpoints, which
come every ``train.eval_every`` updates, are not part of it.

The bare update (``bench.common.training_update``) runs on a second copy of the model, called by
a handler on the batch the loop has just used: the two alternate update by update, so drifts of
the machine's speed hit both alike. The loop's time is the wall time of its updates minus the
time spent in those bare updates.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from ignite.engine import Events

from bench.common import VOCAB, BenchTokens, bench_model_config, multi30k_shaped_split, training_update
from data.pipeline import make_loader
from experiment.config import load_config
from models.transformer import Transformer
from training.engine import create_trainer
from training.handlers import MetricsLog, StepBudget, ThroughputLogger, TrainState
from training.schedules import lr_lambda
from utils.paths import ROOT

WARMUP = 2


def _model_and_optimizer(cfg):
    torch.manual_seed(0)
    model = Transformer(bench_model_config(), VOCAB, VOCAB, pad_id=BenchTokens.pad_id, joint_vocab=True).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, betas=tuple(cfg.train.betas), eps=cfg.train.eps)
    return model, optimizer


def measure(updates: int = 20) -> dict:
    """{loop_updates_per_s, loop_tokens_per_s, bare_updates_per_s, bare_tokens_per_s,
    overhead_percent} over ``updates`` updates after ``WARMUP``, with the Multi30k recipe's
    train section (configs/multi30k/base.yaml)."""
    cfg = load_config(ROOT / "configs" / "multi30k" / "base.yaml")
    split = multi30k_shaped_split()
    loader = make_loader(split, BenchTokens, cfg.train, shuffle=True, seed=1)
    model, optimizer = _model_and_optimizer(cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, len(loader)))
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    state = TrainState()
    trainer = create_trainer(model, optimizer, scheduler, scaler, cfg.train, BenchTokens.pad_id, torch.device("cpu"),
                             state.guard)
    bare_model, bare_optimizer = _model_and_optimizer(cfg)
    timing = {"bare_s": 0.0, "tokens": 0, "start": 0.0}

    def bare_update(engine) -> None:
        t0 = time.perf_counter()
        tokens = training_update(bare_model, bare_optimizer, engine.state.batch, cfg.train.label_smoothing)
        if engine.state.iteration > WARMUP:
            timing["bare_s"] += time.perf_counter() - t0
            timing["tokens"] += tokens
        elif engine.state.iteration == WARMUP:
            timing["start"] = time.perf_counter()

    with tempfile.TemporaryDirectory() as run_dir:
        log = MetricsLog(Path(run_dir))
        for handler in (ThroughputLogger(state, log, cfg.train.log_every, 1), StepBudget(state, WARMUP + updates)):
            handler.attach(trainer)
        trainer.add_event_handler(Events.ITERATION_COMPLETED, bare_update)
        trainer.run(loader, max_epochs=1)
        total = time.perf_counter() - timing["start"]
        log.close()
    loop_s, bare_s = total - timing["bare_s"], timing["bare_s"]
    return {"loop_updates_per_s": updates / loop_s, "loop_tokens_per_s": timing["tokens"] / loop_s,
            "bare_updates_per_s": updates / bare_s, "bare_tokens_per_s": timing["tokens"] / bare_s,
            "overhead_percent": 100 * (loop_s / bare_s - 1)}


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog="python -m nmt bench loop-speed", description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    build_parser().parse_args(argv)
    for key, value in measure().items():
        print(f"{key}: {value:,.2f}")
