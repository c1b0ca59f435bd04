"""The one way to rebuild a trained model: run directory -> ``TrainedRun`` (config, tokenizer, model)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from experiment.checkpoint import check_fits, load_checkpoint
from experiment.config import Config, model_identity
from experiment.manifest import read_manifest
from experiment.run_dir import RunDir, load_run_config
from models.transformer import Transformer
from tokenizer import Tokenizer, load_tokenizer
from utils.errors import UserError

CHECKPOINT_NAMES = ("best", "last", "avg")


def build_model(cfg: Config, tokenizer: Tokenizer) -> Transformer:
    """A fresh model for a config and its tokenizer (vocabulary sizes, pad id, joint vocabulary)."""
    return Transformer(cfg.model, tokenizer.src_vocab_size, tokenizer.tgt_vocab_size,
                       pad_id=tokenizer.pad_id, joint_vocab=tokenizer.joint)


def model_vocab(tokenizer: Tokenizer) -> list[int]:
    """[source, target] vocabulary sizes: what a checkpoint records beside its model section."""
    return [tokenizer.src_vocab_size, tokenizer.tgt_vocab_size]


def checkpoint_path(run_dir: Path, checkpoint: str) -> Path:
    """``best``/``last``/``avg`` name a file in DIR/checkpoints; anything else is a path."""
    if checkpoint in CHECKPOINT_NAMES:
        return RunDir(run_dir).checkpoint(checkpoint)
    return Path(checkpoint)


def missing_checkpoint(run_dir: Path, checkpoint: str, path: Path) -> UserError:
    """The one-line error for a checkpoint that is not there, with the choices and what the run holds
    (``avg`` once ``nmt train --average`` made it)."""
    folder = RunDir(run_dir).checkpoints
    there = sorted(p.name for p in folder.glob("*.pt")) if folder.is_dir() else []
    how = f"; `python -m nmt train --average {run_dir}` makes it" if checkpoint == "avg" else ""
    return UserError(f"checkpoint '{checkpoint}' not found ({path}{how}): use best, last, avg or a .pt path "
                     f"({folder} holds {', '.join(there) or 'no checkpoint'})")


@dataclass
class TrainedRun:
    """A run directory's config, tokenizer and model (eval mode, on its device)."""

    run_dir: Path
    cfg: Config
    tokenizer: Tokenizer
    model: Transformer
    checkpoint: Path
    step: int | None

    @property
    def max_source_tokens(self) -> int:
        return max_source_tokens(self.cfg)


def load_run(run_dir: str | Path, checkpoint: str = "best", device: str | torch.device = "cpu",
             overrides: list[str] | None = None) -> TrainedRun:
    """Config, tokenizer and model weights of a run directory, the model in eval mode on ``device``;
    ``overrides`` change the saved config first (decoding or test-time settings: the weights must fit).
    A `transformers` Marian folder loads as a run too (``experiment.marian``)."""
    run_dir = Path(run_dir)
    from experiment.marian import is_marian_folder, load_marian  # (it builds on this module)

    if is_marian_folder(run_dir):
        return load_marian(run_dir, device, overrides)
    if not run_dir.is_dir():
        raise UserError(f"run directory not found: {run_dir} (train one: python -m nmt train --config "
                        f"configs/synthetic/base.yaml --run-dir {run_dir}, a minute on the built-in grammar)")
    cfg = load_run_config(run_dir, overrides)
    tok = load_tokenizer(RunDir(run_dir).tokenizer)
    path = checkpoint_path(run_dir, checkpoint)
    last = checkpoint_path(run_dir, "last")
    if checkpoint == "best" and not path.is_file() and last.is_file():
        # stopped (Ctrl-C, SIGTERM) before its first validation: no best.pt yet, only last.pt
        print(f"warning: {path} does not exist yet (the run stopped before its first validation); "
              f"using {last}", file=sys.stderr)
        path = last
    if not path.is_file():
        raise missing_checkpoint(run_dir, checkpoint, path)
    state = load_checkpoint(path, map_location=device)
    if "model" not in state:
        raise UserError(f"{path} holds no model weights")
    check_fits(state, model_identity(cfg), model_vocab(tok), path, RunDir(run_dir).config)
    model = build_model(cfg, tok)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as err:
        raise UserError(f"{path} does not fit the model of {RunDir(run_dir).config}: "
                        f"{str(err).splitlines()[0]}") from None
    return TrainedRun(run_dir, cfg, tok, model.to(device).eval(), path, state.get("step"))


def max_source_tokens(cfg: Config) -> int:
    """Longest source (subword tokens, eos excluded) the model is asked to read."""
    return cfg.model.positional.max_positions - 1


def with_training_lengths(run_dir: Path, overrides: list[str] | tuple[str, ...]) -> list[str]:
    """Config overrides for decoding a trained run: test-time length settings (``model.length_scaling``)
    get the run's training lengths from its manifest first (the given values win): a study's
    evaluation variants, ``nmt export``."""
    if not any(o.startswith("model.length_scaling.") for o in overrides) or not Path(run_dir).is_dir():
        return list(overrides)  # (a missing run is load_run's one line)
    longest = read_manifest(run_dir).longest_training_tokens
    if not longest:
        raise UserError(f"{run_dir}: its manifest records no longest_training_tokens (runs trained before it was "
                        f"recorded), which the test-time length settings need")
    return [f"model.length_scaling.train_source_tokens={longest['source']}",
            f"model.length_scaling.train_target_tokens={longest['target']}", *overrides]
