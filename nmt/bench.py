"""``python -m nmt bench [TOOL] [options]``: with no tool, the table of ``make bench`` (``bench.run``);
with one of ``bench.TOOLS``, that tool (``python -m nmt bench TOOL --help`` for its options)."""
from __future__ import annotations

import importlib

from bench import TOOLS
from utils.threads import AUTO, threads_claimed


def build_parser():
    """The options of ``python -m nmt bench`` without a tool (``bench.run``'s); each tool has its own."""
    return importlib.import_module("bench.run").build_parser()


def main(argv: list[str] | None = None) -> int | None:
    """The tool named first in ``argv`` (else ``bench.run``), under ``--threads auto``'s share
    (``utils.threads``; ``OMP_NUM_THREADS`` wins) — except ``threads``, whose arrangements are what it
    measures and whose waiting parent is not one of the processes computing."""
    argv = list(argv or [])
    tool = argv[0] if argv and argv[0] in TOOLS else None
    module = TOOLS[tool] if tool else "bench.run"
    if tool == "threads":
        return importlib.import_module(module).main(argv[1:])
    with threads_claimed(AUTO, f"bench {tool or ''}".strip()):  # before torch loads
        return importlib.import_module(module).main(argv[1:] if tool else argv)
