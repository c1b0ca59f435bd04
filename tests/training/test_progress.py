"""What a person watching training sees: progress in updates of the run's budget with rate and time
left (a bar on a terminal, a line a minute elsewhere), no ignite internals at the default log level,
and one line at the end saying what stopped the run and where its best checkpoint is."""
from __future__ import annotations

import dataclasses
import logging
import re

from ignite.engine import Engine

from experiment.config import Config
from experiment.manifest import write_manifest
from nmt.train import ended_line
from training.handlers import Progress, TrainState
from utils.cli import setup_logging


def make_engine() -> Engine:
    engine = Engine(lambda engine, batch: {"loss": 1.0})
    engine.state.metrics = {}
    return engine


def test_off_a_terminal_progress_is_a_line_in_updates_of_the_budget_with_rate_and_time_left(caplog):
    engine = make_engine()
    state = TrainState(accumulate=2)  # two batches an update: 12 batches are 6 of the 8 updates
    Progress(state, max_steps=8, terminal=False, every=0.0).attach(engine)
    with caplog.at_level(logging.INFO, logger="training.handlers"):
        engine.run(range(12), max_epochs=1)
    said = [r.getMessage() for r in caplog.records if r.name == "training.handlers"]
    assert said[0] == "training from update 0 to 8"  # the start, said once
    lines = said[1:]
    assert len(lines) == 6  # once an update, never between the batches of one
    assert re.fullmatch(r"update 1 of 8 \(12%\), [\d.]+ updates/s, about [\d.]+ (s|min \d\d s) left", lines[0]), lines[0]
    assert lines[-1].startswith("update 6 of 8 (75%), ")
    without = Progress(TrainState(), max_steps=0, terminal=False)
    without.first, without.start = 0, 0.0
    assert re.fullmatch(r"update 5, [\d.]+ updates/s", without.line(5))  # no budget: no total, no time left


def test_on_a_terminal_progress_is_a_bar_over_the_budget(capsys):
    engine = make_engine()
    Progress(TrainState(), max_steps=10, terminal=True).attach(engine)
    engine.run(range(6), max_epochs=1)
    drawn = capsys.readouterr().err
    assert re.search(r"\d+/10 \[", drawn) and "update" in drawn  # tqdm's n/total, in updates, not epochs


def test_ignite_internals_are_left_to_debug():
    setup_logging()
    assert not logging.getLogger("ignite.engine.engine.Engine").isEnabledFor(logging.INFO)
    assert logging.getLogger("ignite").level == logging.WARNING  # the suite's own loggers keep the root's INFO
    setup_logging(verbose=True)
    assert logging.getLogger("ignite.engine.engine.Engine").isEnabledFor(logging.DEBUG)
    setup_logging()


def test_a_finished_run_ends_with_what_stopped_it_and_its_best_checkpoint(tmp_path):
    cfg = Config()
    write_manifest(tmp_path, cfg, "cpu", "data-1", ended_by="max_steps")
    line = ended_line(cfg.train, tmp_path, 300, 95.2)
    assert line == (f"stopped: budget of {cfg.train.max_steps} updates reached; best validation BLEU 95.20 in "
                    f"{tmp_path}/checkpoints/best.pt; run directory: {tmp_path}")
    write_manifest(tmp_path, cfg, "cpu", "data-1", ended_by="early_stopping")
    loss = dataclasses.replace(cfg.train, best_metric="loss")
    assert ended_line(loss, tmp_path, 120, -2.5).startswith(
        "stopped: early stopping after 120 updates (validation loss stopped improving); best validation loss 2.50")
