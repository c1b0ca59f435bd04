"""``python -m nmt study NAME|FILE [--schemes ...] [--seeds ...] [--out DIR] [--table] [key=value ...]``.

``demo`` is ``make demo`` (synthetic corpus, tiny model, no network); ``multi30k`` is ``make reproduce-
multi30k``; ``iwslt2017`` the GPU comparison; every archive under ``report/`` is a study's. A study file of
one's own (``my-study.yaml``, e.g. beside a plugin scheme) is named by its path. ``--table`` trains nothing
and remakes every table of the study's archive from its archived runs. ``key=value`` arguments override a run
config's keys (``train.max_steps=30``: a variant, tested but not archived, since the archive holds the study's
own config) or, prefixed ``study.``, the study's own keys (``study.executor.name=slurm``,
``study.executor.mem_gb=64``): where and how a study runs never un-archives it; what its runs train
(``study.overrides``, ``study.rows``, ...) does.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from gpu.queue import Entry, pending_runs, restricted
from nmt.options import add_metrics_argument
from studies.catalog import HERE, RECIPE_KEYS, Study, load_studies, load_study
from studies.driver import run_study
from studies.executor_settings import EXECUTORS
from studies.runs import queue
from studies.tables import write_archive_tables
from utils.cli import setup_logging, with_examples
from utils.device import resolve_device
from utils.errors import UserError

STUDY = "study."  # the prefix of an override of the study's own keys


def build_parser(studies: dict | None = None) -> argparse.ArgumentParser:
    """The parser; ``studies`` (default: ``load_studies()``) gives the study names."""
    studies = load_studies() if studies is None else studies
    parser = argparse.ArgumentParser(prog="python -m nmt study", description=__doc__.splitlines()[0])
    parser.add_argument("study", metavar="NAME|FILE", help="a declared study (studies/<name>.yaml): "
                        + ", ".join(sorted(studies)) + "; or a study file's path (my-study.yaml)")
    parser.add_argument("--schemes", nargs="+", help="train only these rows of the study (scheme names, or the "
                        "labels of its rows)")
    parser.add_argument("--seeds", nargs="+", type=int, help="these seeds (a row with seeds of its own keeps those "
                        "among them)")
    parser.add_argument("--out", help="override the output folder")
    parser.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: the study's device, else cpu)")
    parser.add_argument("--parallel", type=int, help="runs trained at once by the local executor, each in its own "
                        "process with its share of the threads (default: 2 on a CPU with 2+ cores, else 1)")
    parser.add_argument("--executor", choices=EXECUTORS,
                        help="where the runs train (= study.executor.name=NAME): inline (one after another here), "
                        "local (this machine's worker processes, --parallel), submitit-local or slurm (jobs of "
                        "study.executor.runs_per_job runs, submitted and watched); default: the study's executor "
                        "section, else local")
    add_metrics_argument(parser, "the tables'", "the study's, else ")
    parser.add_argument("--table", action="store_true",
                        help="train nothing: remake every table of the study's archive from its archived runs")
    parser.add_argument("--no-tail", action="store_true",
                        help="train, test and archive the runs only: no tables, pictures or explorer page (on a "
                        "lent machine whose time is short; --table makes the archive's tables afterwards)")
    parser.add_argument("--missing", action="store_true",
                        help="train only the selected runs the study's archive lacks (a run archived finished and "
                        "tested is skipped even with no run folder here, as on a fresh GPU machine)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="run-config overrides for every run (train.max_steps=30), or with the prefix 'study.' "
                        "the study's own keys (study.executor.mem_gb=64)")
    return with_examples(parser, "python -m nmt study demo --schemes rope alibi --seeds 1",
                         "python -m nmt study demo-all --table")


def selected(study: Study, args: argparse.Namespace) -> Study:
    """The study with the command line's choice of rows, seeds, output folder and metrics."""
    labels = args.schemes or study.schemes
    unknown = [label for label in labels if label not in study.schemes]
    if unknown:
        raise UserError(f"--schemes: {', '.join(unknown)} not rows of the '{study.name}' study "
                        f"(rows: {', '.join(study.schemes)})")
    rows = study.rows
    if args.seeds:
        rows = {label: replace(row, seeds=tuple(s for s in row.seeds if s in args.seeds) if row.seeds else None)
                for label, row in rows.items()}
    return replace(study, schemes=list(labels), seeds=args.seeds or study.seeds, rows=rows,
                   out=Path(args.out) if args.out else study.out,
                   metrics=args.metrics or study.metrics)


def in_its_environment(study: Study, argv: list[str]) -> int | None:
    """When the study needs environment variables (``env``) this process lacks, the same command
    again in a child process that has them (a CPU kernel set is chosen when PyTorch starts, so it
    cannot be set here); its exit code. None when this process already has them."""
    if all(os.environ.get(key) == value for key, value in study.env.items()):
        return None
    print(f"[{study.name}] running with {' '.join(f'{k}={v}' for k, v in study.env.items())}", flush=True)
    return subprocess.call([sys.executable, "-m", "nmt", "study", *argv], env={**os.environ, **study.env})


def declared_study(name: str, studies: dict[str, Study], study_keys: list[str]) -> Study:
    """The study ``name`` names: a declared one (with ``study_keys`` applied), or a study file's path."""
    if name.endswith((".yaml", ".yml")) or (name not in studies and Path(name).is_file()):
        if not Path(name).is_file():
            raise UserError(f"study file not found: {name}")
        return load_study(Path(name), study_keys)
    if name not in studies:
        raise UserError(f"unknown study '{name}' (declared: {', '.join(sorted(studies))}; or a study file's path)")
    return load_study(HERE / f"{name}.yaml", study_keys) if study_keys else studies[name]


def main(argv=None) -> int | None:
    argv = sys.argv[1:] if argv is None else list(argv)
    STUDIES = load_studies()  # here, not at import: a bad declaration is one line (run_main)
    args = build_parser(STUDIES).parse_intermixed_args(argv)
    setup_logging()
    study_keys = [o[len(STUDY):] for o in args.overrides if o.startswith(STUDY)]
    run_keys = [o for o in args.overrides if not o.startswith(STUDY)]
    if args.executor:
        study_keys.append(f"executor.name={args.executor}")
    declared = declared_study(args.study, STUDIES, study_keys)
    study = selected(replace(declared, overrides=[*declared.overrides, *run_keys]), args)
    if args.table:  # no device: the tables are read from the archive
        write_archive_tables(study)
        return None
    device = args.device or study.device
    resolve_device(device)
    changed = [o.split("=", 1)[0] for o in study_keys if o.split("=", 1)[0].split(".")[0] in RECIPE_KEYS]
    if device.split(":")[0] != declared.device.split(":")[0]:  # cpu against cuda: another arithmetic (train.amp)
        changed.append(f"--device {device}")
    if (run_keys or changed) and study.archive is not None:
        # The archive holds the study's own config only: a variant must not replace a report row.
        print(f"[{study.name}] {', '.join([*run_keys, *changed])} given: results stay under {study.out} and are "
              f"not archived in {study.archive}", flush=True)
        study = replace(study, archive=None)
    if args.missing:
        if study.archive is None:
            raise UserError(f"--missing: the '{study.name}' study keeps no archive here to look the runs up in")
        pending = pending_runs(Entry(study, tuple(queue(study)), ""))
        if not pending:
            print(f"[{study.name}] nothing to train: every selected run is archived in {study.archive}", flush=True)
            return None
        study = restricted(study, pending)
    code = in_its_environment(study, argv)
    if code is not None:
        return code
    run_study(study, device, args.parallel, tail=not args.no_tail)
    return None
