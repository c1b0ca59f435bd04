"""The tracked tree stays small enough to travel (a GPU machine receives at most 64 MiB of it): the
guard, counted as ``git ls-files -z | du -cb --files0-from=-``, and every archive under report/ in
the layout that stores each test set once."""
from __future__ import annotations

import subprocess

import pytest

from experiment.run_dir import archives_under, check_archive_layout
from gpu.tree_size import LIMIT_MIB, MIB, check_tree_size, tracked_files, tree_size
from tests.conftest import ROOT
from utils.errors import UserError


def du_total(root) -> int:
    """What the issue's shell line counts, run here as the shell would."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    out = subprocess.run(["du", "-cb", "--files0-from=-"], input=listed, cwd=root, capture_output=True, check=True)
    return int(out.stdout.decode().strip().splitlines()[-1].split()[0])


def test_the_tracked_tree_is_under_the_guard():
    size = check_tree_size(ROOT)  # raises, naming the largest folders, above LIMIT_MIB
    assert size.total <= LIMIT_MIB * MIB
    assert size.total == du_total(ROOT)


def test_the_guard_names_the_largest_folders_of_a_planted_large_file(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "report" / "big").mkdir(parents=True)
    (tmp_path / "report" / "big" / "hyps.txt").write_bytes(b"x" * (3 * MIB))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_bytes(b"y" * 1000)
    (tmp_path / "untracked.bin").write_bytes(b"z" * (5 * MIB))  # not tracked: not counted
    subprocess.run(["git", "-C", str(tmp_path), "add", "report", "docs"], check=True)
    size = tree_size(tmp_path, tracked_files(tmp_path))
    assert size.total == 3 * MIB + 1000 == du_total(tmp_path)
    assert size.largest(2) == [("report", 3 * MIB), ("report/big", 3 * MIB)]
    assert check_tree_size(tmp_path, limit_mib=4).total == 3 * MIB + 1000
    with pytest.raises(UserError, match=r"holds 3\.0 MiB, over the 2 MiB limit; largest folders: report/ 3\.0 MiB, "
                                        r"report/big/ 3\.0 MiB, docs/ 0\.0 MiB"):
        check_tree_size(tmp_path, limit_mib=2)


def test_every_archive_under_report_stores_its_test_sets_once():
    archives = archives_under(ROOT / "report")
    assert len(archives) >= 10
    for archive in archives:
        check_archive_layout(archive)
    copies = [p for p in tracked_files(ROOT) if p.parts[0] == "report" and p.name in ("srcs.txt", "refs.txt", "hyps.txt")]
    assert copies == []
