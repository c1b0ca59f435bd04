"""``python -m nmt gpu tree-size``: how many bytes the tracked tree holds (what a clone checks out
and what a GPU machine receives of the working tree, which takes at most 64 MiB), the largest
folders first. ``make test`` holds it under ``LIMIT_MIB`` (tests/gpu/test_tree_size.py).

Counted as ``git ls-files -z | du -cb --files0-from=-``: the apparent size of every tracked file.
"""
from __future__ import annotations

import argparse
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from utils.errors import UserError
from utils.paths import ROOT

LIMIT_MIB = 48  # the guard: room for the length study (docs/performance.md) under the device's 64 MiB
MIB = 1024 * 1024


def tracked_files(root: Path) -> list[Path]:
    """The files git tracks under ``root`` (a checkout), as paths relative to it."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise UserError(f"{root}: cannot list the tracked files with git ({err})") from None
    return [Path(name) for name in listed.decode("utf-8").split("\0") if name]


@dataclass(frozen=True)
class TreeSize:
    """The bytes of a set of files: in all, and by folder at each depth up to ``depth``."""

    total: int
    folders: Counter  # "report", "report/multi30k", ... -> bytes under it

    def largest(self, count: int = 5, depth: int = 2) -> list[tuple[str, int]]:
        """The ``count`` largest folders at most ``depth`` deep, largest first (ties by name)."""
        deep = [(name, size) for name, size in self.folders.items() if name.count("/") < depth]
        return sorted(deep, key=lambda item: (-item[1], item[0]))[:count]

    def describe(self, count: int = 5) -> str:
        return ", ".join(f"{name}/ {size / MIB:.1f} MiB" for name, size in self.largest(count))


def tree_size(root: Path, files: list[Path]) -> TreeSize:
    """The size of ``files`` (relative to ``root``; a tracked file deleted from the work tree counts 0)."""
    folders: Counter = Counter()
    total = 0
    for name in files:
        path = Path(root) / name
        size = path.stat().st_size if path.is_file() and not path.is_symlink() else 0
        total += size
        for parent in list(name.parents)[:-1]:
            folders[parent.as_posix()] += size
    return TreeSize(total, folders)


def check_tree_size(root: Path, limit_mib: float = LIMIT_MIB) -> TreeSize:
    """The tracked tree's size; one line naming the largest folders when it exceeds ``limit_mib``."""
    size = tree_size(root, tracked_files(root))
    if size.total > limit_mib * MIB:
        raise UserError(f"the tracked tree holds {size.total / MIB:.1f} MiB, over the {limit_mib:g} MiB limit; "
                        f"largest folders: {size.describe()}")
    return size


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt gpu tree-size",
                                     description="The tracked tree's size, the largest folders first.")
    parser.add_argument("--root", default=str(ROOT), help="a checkout (default: this one)")
    parser.add_argument("--limit", type=float, default=LIMIT_MIB, help=f"MiB; exit 2 above it (default {LIMIT_MIB})")
    parser.add_argument("--top", type=int, default=10, help="folders listed (default 10)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    size = tree_size(Path(args.root), tracked_files(Path(args.root)))
    print(f"tracked tree: {size.total:,} bytes ({size.total / MIB:.1f} MiB; limit {args.limit:g} MiB)")
    for name, folder_size in size.largest(args.top):
        print(f"  {folder_size / MIB:7.2f} MiB  {name}/")
    check_tree_size(Path(args.root), args.limit)
