"""Train a translation model: ``python -m nmt train --config FILE [--run-dir DIR] [key=value ...]``
(or ``python train.py``, the same flags).

Also ``--resume DIR [key=value ...]`` (continue; e.g. ``train.max_steps=M``
extends a finished run), ``--average DIR [--last K]`` (average the last K
step checkpoints into DIR/checkpoints/avg.pt) and ``--config FILE --data-only``
(prepare the data and tokenizer, cached, print their figures, train nothing). Several GPUs:
``torchrun --nproc_per_node=N train.py --config FILE``.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from nmt.options import add_threads_argument
from utils.cli import setup_logging, with_examples
from utils.threads import threads_claimed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt train", description="Train a config into a run directory, "
                                     "resume a run, or average its last checkpoints.")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--config", help="YAML experiment config")
    what.add_argument("--resume", metavar="DIR", help="continue the run in DIR from checkpoints/last.pt")
    what.add_argument("--average", metavar="DIR", help="average the last K step checkpoints of DIR")
    parser.add_argument("--run-dir", help="output folder (default: runs/<family>/<name> for "
                        "configs/<family>/<stem>.yaml, else runs/<name>; <name> is the config's stem, or the "
                        "scheme for a base.yaml)")
    parser.add_argument("--overwrite", action="store_true", help="delete an existing run directory first")
    parser.add_argument("--data-only", action="store_true",
                        help="with --config: prepare the data and tokenizer, print their figures, train nothing")
    parser.add_argument("--last", type=int, default=5, help="with --average: how many checkpoints (default 5)")
    add_threads_argument(parser, "the cores this process may use, divided among the suite's processes running on "
                                 "the machine, taken anew as they come and go; python -m nmt bench threads compares "
                                 "arrangements")
    parser.add_argument("--backend", default=None, help="torch.distributed backend (default: nccl on GPU, gloo on CPU)")
    parser.add_argument("overrides", nargs="*", help="config overrides section.key=value")
    return with_examples(parser, "python -m nmt train --config configs/synthetic/base.yaml model.positional.name=rope",
                         "python -m nmt train --resume runs/synthetic/rope train.max_steps=600")


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_intermixed_args(argv)


def default_run_dir(config: Path, scheme: str) -> Path:
    """runs/<name>, or runs/<family>/<name> for configs/<family>/<stem>.yaml (so that the multi30k
    and iwslt2017 runs of one scheme do not collide). <name> is the config's stem, or for a
    ``base.yaml`` (one per family: the scheme is ``model.positional.name=<scheme>``) the scheme."""
    name = scheme if config.stem == "base" else config.stem
    parent = config.resolve().parent
    if parent.parent.name == "configs":
        return Path("runs") / parent.name / name
    return Path("runs") / name


def main(argv=None) -> None:
    args = parse_args(argv)
    setup_logging()
    with threads_claimed(args.threads, "train"):  # before torch loads: OpenMP reads its wait policy then
        run(args)


def run(args: argparse.Namespace) -> None:
    """The command, its threads claimed."""
    from experiment.config import load_config
    from experiment.run_dir import load_run_config
    from training.loop import average, train

    if args.average:
        out, paths = average(Path(args.average), args.last)
        print(f"averaged {len(paths)} checkpoints ({paths[0].name} .. {paths[-1].name}) into {out}")
        return
    if args.data_only:
        from data.pipeline import describe, prepare_data

        cfg = load_config(args.config, args.overrides)
        start = time.perf_counter()
        data = prepare_data(cfg.data, cfg.tokenizer, cfg.seed)
        seconds = time.perf_counter() - start
        print("\n".join(describe(data, cfg.train, cfg.seed)))
        pairs = sum(len(s) for s in data.corpus.values())
        print(f"prepared {pairs} pairs in {seconds:.1f} s ({pairs / max(seconds, 1e-9):,.0f} pairs/s)")
        return
    if args.resume:
        run_dir = Path(args.resume)
        cfg = load_run_config(run_dir, args.overrides)
    else:
        cfg = load_config(args.config, args.overrides)
        run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(Path(args.config), cfg.model.positional.name)
    result = train(cfg, run_dir, resume=bool(args.resume), overwrite=args.overwrite, backend=args.backend)
    print(ended_line(cfg.train, run_dir, result.steps, result.best))


def ended_line(train_cfg, run_dir: Path, steps: int, best: float | None) -> str:
    """The one line a finished run ends with: what stopped it (read off its manifest), its best
    validation score and where that checkpoint is, and the run directory."""
    from experiment.manifest import read_manifest
    from experiment.run_dir import RunDir

    ended_by = read_manifest(run_dir).ended_by
    reason = {"max_steps": f"budget of {train_cfg.max_steps} updates reached",
              "early_stopping": f"early stopping after {steps} updates (validation {train_cfg.best_metric} stopped "
                                f"improving)",
              "max_epochs": f"{train_cfg.max_epochs} epochs done after {steps} updates"}.get(ended_by, f"{steps} updates")
    shown = ""
    if best is not None:  # higher is better: the loss is kept negated
        value = -best if train_cfg.best_metric == "loss" else best
        metric = "BLEU" if train_cfg.best_metric == "bleu" else train_cfg.best_metric
        shown = f"; best validation {metric} {value:.2f} in {RunDir(run_dir).best}"
    return f"stopped: {reason}{shown}; run directory: {run_dir}"

