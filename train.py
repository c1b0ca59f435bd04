"""Train a translation model: ``python train.py --config FILE [--run-dir DIR] [key=value ...]``.

Also ``python train.py --resume DIR [key=value ...]`` (continue; e.g. ``train.max_steps=M``
extends a finished run) and ``python train.py --average DIR [--last K]`` (average the last K
step checkpoints into DIR/checkpoints/avg.pt). Several GPUs:
``torchrun --nproc_per_node=N train.py --config FILE``.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import ignite.distributed as idist
import torch

from utils.checkpoint import atomic_torch_save, average_checkpoints, step_checkpoints
from utils.cli import run_main, setup_logging
from utils.config import load_config
from utils.errors import UserError
from utils.run_dir import load_run_config, prepare_new_run
from utils.training import TrainJob, training


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train an NMT Transformer (see the module docstring).")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--config", help="YAML experiment config")
    what.add_argument("--resume", metavar="DIR", help="continue the run in DIR from checkpoints/last.pt")
    what.add_argument("--average", metavar="DIR", help="average the last K step checkpoints of DIR")
    parser.add_argument("--run-dir", help="output folder (default: runs/<config file stem>)")
    parser.add_argument("--overwrite", action="store_true", help="delete an existing run directory first")
    parser.add_argument("--last", type=int, default=5, help="with --average: how many checkpoints (default 5)")
    parser.add_argument("--backend", default=None, help="torch.distributed backend (default: nccl on GPU, gloo on CPU)")
    parser.add_argument("overrides", nargs="*", help="config overrides section.key=value")
    return parser.parse_intermixed_args(argv)


def default_run_dir(config: Path) -> Path:
    """runs/<stem>, or runs/<family>/<stem> for configs/<family>/<stem>.yaml (so that
    configs/multi30k/rope.yaml and configs/iwslt2017/rope.yaml do not collide)."""
    parent = config.resolve().parent
    if parent.parent.name == "configs":
        return Path("runs") / parent.name / config.stem
    return Path("runs") / config.stem


def average(run_dir: Path, last: int) -> Path:
    paths = step_checkpoints(run_dir / "checkpoints")[-last:]
    if not paths:
        raise UserError(f"no step_<N>.pt checkpoints in {run_dir / 'checkpoints'} to average")
    out = run_dir / "checkpoints" / "avg.pt"
    atomic_torch_save(average_checkpoints(paths), out)
    print(f"averaged {len(paths)} checkpoints ({paths[0].name} .. {paths[-1].name}) into {out}")
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    setup_logging()
    if args.average:
        average(Path(args.average), args.last)
        return
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "checkpoints" / "last.pt").is_file():
            raise UserError(f"cannot resume {run_dir}: no checkpoints/last.pt")
        cfg = load_run_config(run_dir, args.overrides)
    else:
        cfg = load_config(args.config, args.overrides)
        run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(Path(args.config))
        if idist.get_rank() == 0 and int(os.environ.get("RANK", "0")) == 0:
            prepare_new_run(run_dir, args.overwrite)
    job = TrainJob(cfg, run_dir, resume=bool(args.resume))
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    # Under torchrun (WORLD_SIZE set) idist.Parallel joins the process group; otherwise one process.
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    with idist.Parallel(backend=backend if distributed else None) as parallel:
        parallel.run(training, job)
    print(f"run directory: {run_dir} (steps: {job.result.get('steps')})")


if __name__ == "__main__":
    run_main(main)
