"""Options that several commands share, defined once: which checkpoint and machine (``translate``,
``test``), how to search (beam, stopping rule, engine), and a table's metric columns (``test``, ``study``)."""
from __future__ import annotations

import argparse

from experiment.decode_config import ENGINES, STOPPING_RULES
from utils.threads import AUTO

# Decoding a small model is latency-bound: on a busy 2-core machine scoring the demo model ran at
# 12.7 sentences/s with torch's default threads and at 165.8 with one, so under ``auto`` the
# decoding commands take at most one thread.
DECODE_THREADS = 1


def add_threads_argument(p: argparse.ArgumentParser, what: str) -> None:
    """--threads auto|N: ``what`` says what auto comes to for this command."""
    p.add_argument("--threads", default=AUTO, metavar="auto|N",
                   help=f"intra-op CPU threads: auto (default: {what}; see utils/threads.py) or N, which, like "
                        "OMP_NUM_THREADS, always wins")


def add_metrics_argument(p: argparse.ArgumentParser, whose: str, default: str = "") -> None:
    """--metrics METRIC ...: the comparison tables' metric columns (``scoring.table_metrics``); ``whose``
    opens the help ("the tables'"), ``default`` names what stands before the suite's default."""
    from scoring.table_metrics import DEFAULT_METRICS, METRICS  # noqa: PLC0415 (numpy stays unloaded until a command claims its threads)

    p.add_argument("--metrics", nargs="+", choices=list(METRICS), metavar="METRIC",
                   help=f"{whose} metric columns, in order (default: {default}{' '.join(DEFAULT_METRICS)}; "
                        f"known: {', '.join(METRICS)})")


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """--checkpoint, --device, --threads."""
    p.add_argument("--checkpoint", default="best", help="best | last | avg | PATH (default best)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
    add_threads_argument(p, f"this machine's free share of its cores, at most {DECODE_THREADS} for decoding")


def add_search_arguments(p: argparse.ArgumentParser, greedy: bool = False) -> None:
    """--beam (and, with ``greedy``, --greedy beside it), --stopping, --len-penalty, --engine, --compute-type."""
    beam = p.add_mutually_exclusive_group() if greedy else p
    beam.add_argument("--beam", type=int, default=None, help="beam size (default: the run's decode.beam)")
    if greedy:
        beam.add_argument("--greedy", action="store_true", help="greedy search (beam 1)")
    p.add_argument("--stopping", choices=STOPPING_RULES, default=None,
                   help="beam search's stopping rule (default: the run's decode.stopping)")
    p.add_argument("--len-penalty", type=float, default=None, metavar="ALPHA",
                   help="GNMT length penalty alpha, 0 for none (default: the run's decode.len_penalty)")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="decoding engine: auto (default: CTranslate2 for greedy search of a scheme that exports, "
                        "else PyTorch; stderr says which and why), torch, or ctranslate2 (the run is exported on "
                        "first use into DIR/ctranslate2/)")
    p.add_argument("--compute-type", default="float32",
                   help="CTranslate2's arithmetic: float32 (default), int8, int8_float32, ... (quantized on load)")
