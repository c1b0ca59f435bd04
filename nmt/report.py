"""``python -m nmt report [--check]``: write report.md from the archive under report/ and the readings
in report/text/ (``reporting.document``), README's table head from the same tables, and the table of
which machine each archive ran on in docs/performance.md (``reporting.machines``).

``--check`` writes nothing and fails when report.md, README's table or the machines' table differ
from what the archive and readings give, naming each differing place as FILE:LINE (an edit made to
report.md by hand included), or when the readings hold breaches (every one, FILE:LINE and its reason; ``make test``
checks it through tests/test_report.py).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from reporting.document import build_report, differing_lines, with_machines_table, with_readme_table
from utils.cli import with_examples
from utils.errors import UserError
from utils.io import atomic_write_text
from utils.paths import ROOT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt report", description="Write report.md (README's table head, "
                                     "docs/performance.md's machines) from the archive under report/ and the readings "
                                     "in report/text/.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if report.md, README's table "
                        "or docs/performance.md's machines differ from what the archive gives")
    parser.add_argument("--root", default=str(ROOT), help="the checkout holding report/, report.md, README.md and "
                        "docs/performance.md (default: this one)")
    return with_examples(parser, "python -m nmt report",
                         "python -m nmt report --check")


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    root = Path(args.root)
    report, readme, performance = root / "report.md", root / "README.md", root / "docs" / "performance.md"
    for page in (readme, performance):
        if not page.is_file():
            raise UserError(f"{page} not found (--root names a checkout)")
    wanted = {report: build_report(root), readme: with_readme_table(readme.read_text(encoding="utf-8"), root),
              performance: with_machines_table(performance.read_text(encoding="utf-8"), root)}
    stale = [path for path, text in wanted.items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if args.check:
        if stale:
            places = [place for path in stale if path.is_file()
                      for place in differing_lines(path, path.read_text(encoding="utf-8"), wanted[path])]
            raise UserError(f"out of date with the archive and readings: {', '.join(map(str, stale))} (an edit made by "
                            f"hand is lost: edit report/text/ and run python -m nmt report)"
                            + "".join(f"\n  {place}" for place in places))
        print("report.md, README's table and docs/performance.md's machines match the archive")
        return
    for path in stale:
        print(atomic_write_text(path, wanted[path]))
    if not stale:
        print("report.md, README's table and docs/performance.md's machines already match the archive")
