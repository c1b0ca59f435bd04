"""``python -m nmt COMMAND [options]``: the single way in.

    train       train a config into a run directory (or resume, extend, average checkpoints)
    translate   translate sentences with a trained run (arguments or standard input)
    test        score a run on its test sets, or compare runs in a table
    visualize   pictures: attention maps, positional encodings, curves, BLEU by length
    study       a declared study (studies/<name>.yaml): train, test, archive, tables, pictures
    bench       the speed benchmarks (make bench) and the measuring tools (bench TOOL --help)
    export      a trained run in CTranslate2's format
    docs        the reference pages generated from the code (docs/configs.md, schemes.md, commands.md)
    report      report.md (and README's table head) generated from the archive under report/
    archive     keep the archives under report/ in their layout (archive migrate)
    gpu         spend a lent GPU on the runs the archive lacks (gpu prep, wave, unpack, check, tree-size)
    data        get a real corpus onto this machine (data fetch multi30k), checksums checked
    scheme      check a positional encoding against the suite's contract (scheme check NAME)

``python -m nmt COMMAND --help`` describes a command's options. The card's scripts ``train.py``,
``inference.py`` (= translate), ``test.py`` and ``visualize.py`` run the same commands with the same
flags.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from utils.cli import run_main

# command -> the module whose main(argv) runs it (imported only when chosen: --help stays fast)
COMMANDS = {"train": "nmt.train", "translate": "nmt.translate", "test": "nmt.evaluate",
            "visualize": "nmt.visualize", "study": "nmt.study", "bench": "nmt.bench",
            "export": "nmt.export", "docs": "nmt.docs",
            "report": "nmt.report", "archive": "nmt.archive",
            "gpu": "nmt.gpu", "data": "nmt.data", "scheme": "nmt.scheme"}


def main(argv: list[str] | None = None, prog: str = "python -m nmt") -> int | None:
    parser = argparse.ArgumentParser(prog=prog, description="Positional encodings compared in French-to-"
                                     "English translation: one command per thing users do.",
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("command", choices=list(COMMANDS), metavar="COMMAND", help=", ".join(COMMANDS))
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the command's options (COMMAND --help)")
    argv = sys.argv[1:] if argv is None else argv
    if not argv:  # the commands, not argparse's "arguments are required"
        print(f"usage: {prog} COMMAND [options]   ({prog} COMMAND --help for one)\n\n"
              f"{__doc__.split(chr(10) + chr(10))[1]}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    return importlib.import_module(COMMANDS[args.command]).main(args.args)


def cli() -> None:
    """The installed ``nmt`` command (pyproject.toml's console script)."""
    run_main(lambda: main(prog="nmt"))


if __name__ == "__main__":
    cli()
