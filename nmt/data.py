"""``python -m nmt data fetch multi30k [--into DIR] [--mirror URL]``: the real corpus onto this machine
(``data.fetch``), into the folder ``MULTI30K_DIR`` names (default: ``$MULTI30K_DIR``, else
``datasets/multi30k-fr-en``); then the line to export. ``make data`` runs it."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from data.fetch import CORPORA, fetch
from utils.config import shown

DEFAULT_INTO = Path("datasets") / "multi30k-fr-en"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt data", description="Get a real corpus onto this machine.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = actions.add_parser("fetch", help="download a corpus's official files and check each one's checksum",
                             description="Download the corpus's official files where missing, check each one's "
                             "SHA-256 and line count, and move it into place (data/fetch.py; docs/data.md).")
    get.add_argument("corpus", choices=list(CORPORA), help="the corpus (multi30k: task 1, French-English, raw)")
    get.add_argument("--into", type=Path, default=None, metavar="DIR",
                     help=f"the folder (default: $MULTI30K_DIR, else {DEFAULT_INTO})")
    get.add_argument("--mirror", default=None, metavar="URL",
                     help="where the files are (a URL of their folder; file:///path works) instead of the official one")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    into = args.into or Path(os.environ.get("MULTI30K_DIR") or DEFAULT_INTO)
    print(f"[data] {args.corpus} into {shown(into)}", flush=True)
    fetch(args.corpus, into, args.mirror, report=lambda line: print(line, flush=True))
    print(f"[data] done; the tests and configs find it with: export MULTI30K_DIR={shown(into)}", flush=True)
