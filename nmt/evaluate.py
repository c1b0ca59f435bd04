"""Score a trained run on test sets, or compare runs: ``python -m nmt test`` (or ``python test.py``,
the same flags).

``python -m nmt test --run DIR [--split NAME ...] [--src FILE --ref FILE] [--concat K ...] [--beam N] [--stopping R]
[--checkpoint C]`` translates the run's configured test splits (or the named ones, or a file pair,
plain or .gz) and writes DIR/eval/<test set>/{hyps.txt,refs.txt,srcs.txt,results.json}; ``--concat``
adds each set's K-sentence segments as test set ``<name>_concat<K>`` (``data.concatenated``).

``python -m nmt test --compare DIR ... [--testset NAME] [--baseline DIR] [--out FILE.md] [--metrics M ...] [--groups]
[--allow-mixed-arithmetic]`` prints the comparison table (Markdown) and writes it with a CSV twin
beside it; ``--groups`` adds the rows' significance groups (every pair tested, Holm-corrected:
``scoring.groups``), written beside a ``comparison_X.md`` as ``groups_X.md`` (+ CSV). Runs of other
machines, precisions or torch versions are refused unless ``--allow-mixed-arithmetic``
(``scoring.arithmetic``); the caption then lists the mix.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from nmt.options import DECODE_THREADS, add_metrics_argument, add_run_arguments, add_search_arguments
from utils.cli import with_examples
from utils.errors import UserError
from utils.threads import ThreadChoice, threads_claimed


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nmt test", description="Score trained runs on test sets, or compare runs.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--run", metavar="DIR", help="run directory to evaluate")
    what.add_argument("--compare", nargs="+", metavar="DIR", help="run directories to compare")
    p.add_argument("--split", nargs="+", default=None, help="test split name(s) of the run's data source")
    p.add_argument("--src", help="source file (plain or .gz)")
    p.add_argument("--ref", help="reference file, line-aligned with --src")
    p.add_argument("--name", help="test set name for --src/--ref (default: from the file name)")
    p.add_argument("--concat", nargs="+", type=int, default=[], metavar="K",
                   help="with --run: also translate each test set's K consecutive sentences joined into one input, "
                   "scored against the K references joined (test set <name>_concat<K>; the last sentences too few "
                   "for a group are left out)")
    add_run_arguments(p)
    add_search_arguments(p)
    p.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="with --run: decoding or test-time settings changed first (decode.max_len_b=3, "
                   "model.length_scaling.logn=true: the training lengths from the run's manifest)")
    p.add_argument("--testset", help="with --compare: which test set (default: the first run's first test split)")
    p.add_argument("--baseline", help="with --compare: baseline run (default: the sinusoidal run, else the first)")
    p.add_argument("--out", help="with --compare: write the Markdown table here (and FILE.csv beside it)")
    add_metrics_argument(p, "with --compare: the table's")
    p.add_argument("--groups", action="store_true",
                   help="with --compare: also the significance groups (a letter per group of rows not shown to differ, "
                   "every pair tested, Holm-corrected); with --out written beside the table as groups_<name>.md")
    p.add_argument("--allow-mixed-arithmetic", action="store_true",
                   help="with --compare: let runs of different CPUs, kernel sets, threads, GPUs, torch versions or "
                   "precisions share the table (refused by default; the caption lists the mix)")
    return with_examples(p, "python -m nmt test --run runs/synthetic/sinusoidal",
                         "python -m nmt test --compare report/demo-all/rope report/demo-all/sinusoidal",
                         "python -m nmt test --run runs/opus-mt-fr-en --src FILE.fr --ref FILE.en --set decode.max_len_b=10")


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def testset_name(path: str) -> str:
    """test_2016_flickr.fr.gz -> test_2016_flickr."""
    name = Path(path).name
    name = re.sub(r"\.gz$", "", name)
    return re.sub(r"\.[A-Za-z]{2,3}$", "", name) or name


def run_compare(args: argparse.Namespace) -> None:
    from experiment.run_dir import load_run_config
    from scoring.compare import compare, write_comparison
    from scoring.groups import groups_path, significance_groups, write_groups

    dirs = [Path(d) for d in args.compare]
    for d in dirs:
        if not d.is_dir():
            raise UserError(f"run directory not found: {d}")
    testset = args.testset or load_run_config(dirs[0]).data.test_splits[0]
    baseline = Path(args.baseline) if args.baseline else None
    mixed = args.allow_mixed_arithmetic
    if args.out:
        markdown_path, csv_path = write_comparison(dirs, testset, Path(args.out), baseline, args.metrics, mixed)
        print(markdown_path.read_text(encoding="utf-8"), end="")
        print(f"written: {markdown_path} and {csv_path}")
        if args.groups:
            groups_md, groups_csv = write_groups(dirs, testset, groups_path(markdown_path), mixed)
            print(groups_md.read_text(encoding="utf-8"), end="")
            print(f"written: {groups_md} and {groups_csv}")
    else:
        print(compare(dirs, testset, baseline, args.metrics, mixed)[0], end="")
        if args.groups:
            print(significance_groups(dirs, testset, mixed)[0], end="")


def run_test(args: argparse.Namespace, threads: ThreadChoice) -> None:
    from data.parallel_text import read_parallel_files
    from experiment.decode_config import resolve_settings
    from experiment.marian import is_marian_folder
    from experiment.run_dir import save_config
    from experiment.trained import load_run, with_training_lengths
    from search.engines import choose_engine
    from search.evaluate import evaluate_sets, evaluate_splits
    from utils.device import resolve_device

    if bool(args.src) != bool(args.ref):
        raise UserError("--src and --ref go together")
    device = resolve_device(args.device)
    run = load_run(args.run, args.checkpoint, device, overrides=with_training_lengths(args.run, args.overrides))
    settings = resolve_settings(run.cfg.decode, beam=args.beam, stopping=args.stopping, len_penalty=args.len_penalty)
    choice = choose_engine(run, settings, args.engine, device, args.compute_type, threads.count())
    if args.src:
        sources, references = read_parallel_files(args.src, args.ref)
        results = evaluate_sets(run, [(args.name or testset_name(args.src), sources, references)], settings, device,
                                choice, args.concat)
    else:
        results = evaluate_splits(run, args.split, settings, device, choice, args.concat)
    if is_marian_folder(run.run_dir):  # what --compare reads of a run, beside the Marian folder's scores
        save_config(run.run_dir, run.cfg)
    print(choice.line(), file=sys.stderr)  # after the evaluation: bad input stays a one-line error
    for result in results:
        print(result.summary())


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.compare:
        run_compare(args)
    else:
        with threads_claimed(args.threads, "test", cap=DECODE_THREADS) as threads:  # before torch loads
            run_test(args, threads)

