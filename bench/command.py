"""``python -m nmt bench [TOOL] [options]``: with no tool, the table of ``make bench`` (``bench.run``);
with one of ``bench.TOOLS``, that tool (``python -m nmt bench TOOL --help`` for its options)."""
from __future__ import annotations

import importlib

from bench import TOOLS


def build_parser():
    """The options of ``python -m nmt bench`` without a tool (``bench.run``'s); each tool has its own."""
    return importlib.import_module("bench.run").build_parser()


def main(argv: list[str] | None = None) -> int | None:
    argv = list(argv or [])
    if argv and argv[0] in TOOLS:
        return importlib.import_module(TOOLS[argv[0]]).main(argv[1:])
    return importlib.import_module("bench.run").main(argv)
