"""``python -m nmt archive migrate [FOLDER ...]``: move archives to the layout that stores each test
set once (``experiment.run_dir``: ``testsets/``, each run's hypotheses as ``hyps.txt.gz``, its
records naming their texts' checksums); with no folder, every archive under report/. An archive
in the layout already is left as it is, and a migration stopped midway is finished by running it
again. ``make tables`` then remakes every table byte for byte from the migrated archives.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from experiment.run_dir import archives_under
from studies.archive import migrate_archive
from utils.cli import with_examples
from utils.errors import UserError
from utils.paths import ROOT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt archive", description="Keep a study's archive in the layout "
                                     "that stores each test set once.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    migrate = actions.add_parser("migrate", help="move archives of the old layout (each run kept its own copy of every "
                                 "test set) to the layout with testsets/",
                                 description="Move archives to the layout that stores each test set once "
                                 "(studies.archive).")
    migrate.add_argument("folders", nargs="*", metavar="FOLDER",
                         help="an archive (a folder of run folders); default: every archive under report/")
    return with_examples(parser, "python -m nmt archive migrate report/demo-all")


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    folders = [Path(f) for f in args.folders] or archives_under(ROOT / "report")
    for folder in folders:
        if not folder.is_dir():
            raise UserError(f"{folder}: no such archive folder")
    for folder in folders:
        print(migrate_archive(folder).summary(), flush=True)
