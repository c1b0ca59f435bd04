"""``python -m nmt data fetch multi30k [--into DIR] [--mirror URL]``: the real corpus onto this machine
(``data.fetch``), into ``$MULTI30K_DIR``, else the checkout's ``datasets/multi30k-fr-en``, where the
configs' ``data.dir: $MULTI30K_DIR`` finds it unset (``data.fetch.data_folder``). ``make data`` runs it."""
from __future__ import annotations

import argparse
from pathlib import Path

from data.fetch import CORPORA, DATA_FOLDERS, data_folder, fetch
from utils.cli import with_examples
from utils.config import shown


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt data", description="Get a real corpus onto this machine.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    get = actions.add_parser("fetch", help="download a corpus's official files and check each one's checksum",
                             description="Download the corpus's official files where missing, check each one's "
                             "SHA-256 and line count, and move it into place (data/fetch.py; docs/data.md).")
    get.add_argument("corpus", choices=list(CORPORA), help="the corpus (multi30k: task 1, French-English, raw)")
    get.add_argument("--into", type=Path, default=None, metavar="DIR",
                     help=f"the folder (default: $MULTI30K_DIR, else {DATA_FOLDERS['MULTI30K_DIR']} from the checkout's root)")
    get.add_argument("--mirror", default=None, metavar="URL",
                     help="where the files are (a URL of their folder; file:///path works) instead of the official one")
    return with_examples(parser, "python -m nmt data fetch multi30k",
                         "python -m nmt data fetch multi30k --into /data/multi30k-fr-en")


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    into = args.into or data_folder("MULTI30K_DIR")
    print(f"[data] {args.corpus} into {shown(into)}", flush=True)
    fetch(args.corpus, into, args.mirror, report=lambda line: print(line, flush=True))
    if into.resolve() == data_folder("MULTI30K_DIR").resolve():
        print("[data] done: the configs find it there", flush=True)
    else:
        print(f"[data] done; export MULTI30K_DIR={shown(into)} to have the configs find it", flush=True)
