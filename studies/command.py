"""``python -m nmt study NAME [--schemes ...] [--seeds ...] [--out DIR] [key=value ...]``.

``demo`` is ``make demo`` (synthetic corpus, tiny model, no network); ``multi30k`` is
``make reproduce-multi30k``; ``iwslt2017`` the GPU comparison. ``--table`` trains nothing and
regenerates the comparison tables from the study's archive. Config overrides on the command line
make a variant that is tested but not archived (the archive holds the study's own config).
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from scoring.table_metrics import DEFAULT_METRICS, METRICS
from studies.catalog import load_studies
from studies.driver import default_parallel, run_study, write_archive_tables
from studies.executor import EXECUTORS, with_overrides
from utils.cli import setup_logging
from utils.device import resolve_device
from utils.errors import UserError


def build_parser(studies: dict | None = None) -> argparse.ArgumentParser:
    """The parser; ``studies`` (default: ``load_studies()``) gives the study names."""
    studies = load_studies() if studies is None else studies
    parser = argparse.ArgumentParser(prog="python -m nmt study", description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=sorted(studies), help="the declared study (studies/<name>.yaml): "
                        + ", ".join(sorted(studies)))
    parser.add_argument("--schemes", nargs="+", help="override the study's schemes")
    parser.add_argument("--seeds", nargs="+", type=int, help="override the study's seeds")
    parser.add_argument("--out", help="override the output folder")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
    parser.add_argument("--parallel", type=int, help="runs trained at once, each in its own process with its "
                        "share of the threads (default: 2 on a CPU with 2+ cores, else 1)")
    parser.add_argument("--executor", choices=EXECUTORS,
                        help="where the runs train: inline (one after another here), local (this machine's worker "
                        "processes, --parallel), submitit-local or slurm (each job of runs_per_job runs submitted "
                        "and watched); default: the study's executor section, else local")
    parser.add_argument("--executor-option", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the study's executor section (mem_gb=64, partition=gpu, "
                        "runs_per_job=2, ...); repeatable")
    parser.add_argument("--metrics", nargs="+", choices=list(METRICS), metavar="METRIC",
                        help=f"the tables' metric columns, in order (default: {' '.join(DEFAULT_METRICS)}; known: "
                        f"{', '.join(METRICS)})")
    parser.add_argument("--table", action="store_true",
                        help="train nothing: regenerate the comparison tables from the study's archive")
    parser.add_argument("overrides", nargs="*", help="config overrides for every run")
    return parser


def main(argv=None) -> None:
    STUDIES = load_studies()  # here, not at import: a bad declaration is one line (run_main)
    args = build_parser(STUDIES).parse_intermixed_args(argv)
    setup_logging()
    resolve_device(args.device)
    declared = STUDIES[args.study]
    study = replace(declared, schemes=args.schemes or declared.schemes, seeds=args.seeds or declared.seeds,
                    out=Path(args.out) if args.out else declared.out, overrides=list(args.overrides),
                    executor=with_overrides(declared.executor, args.executor, args.executor_option),
                    metrics=args.metrics)
    if args.table:
        write_archive_tables(study)
        return
    if study.overrides and study.archive is not None:
        # The archive holds the study's own config only: a variant must not replace a report row.
        print(f"[{study.name}] config overrides given: results stay under {study.out} and are not archived "
              f"in {study.archive}", flush=True)
        study = replace(study, archive=None)
    if study.executor.submits_jobs:
        from studies.cluster import run_study_on_scheduler  # submitit is imported only for a scheduler

        run_study_on_scheduler(study, args.device)
        return
    parallel = default_parallel(args.device) if args.parallel is None else args.parallel
    if study.executor.name == "inline":
        parallel = 1
    if parallel < 1:
        raise UserError(f"--parallel must be at least 1, got {parallel}")
    run_study(study, args.device, parallel)
