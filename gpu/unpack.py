"""A wave's packs brought home (``python -m nmt gpu unpack FILE ...``, ``make gpu-unpack``): each
``<study>.tar.xz`` (``gpu.wave.pack``) unpacked into its study's archive, that study's tables
remade (``studies.tables``), and what changed printed: the runs added or replaced, the tables that
differ. A pack is checked whole before anything is written: every member a plain file under its
study's archive folder (or its logs, kept under ``runs/gpu-logs/<study>/``), no absolute path, no
``..``; otherwise one line and nothing written. Files are written atomically.
"""
from __future__ import annotations

import contextlib
import io
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from experiment.run_dir import ArchiveDir, check_archive_layout
from studies.catalog import Study
from studies.tables import write_archive_tables
from utils.errors import UserError
from utils.io import atomic_write

SUFFIX = ".tar.xz"
LOGS = "logs"  # a pack's folder of run logs (not archived)


@dataclass
class Unpacked:
    """What one pack changed."""

    study: str
    added: list[str] = field(default_factory=list)  # run folders new to the archive
    replaced: list[str] = field(default_factory=list)  # run folders whose files changed
    tables: list[str] = field(default_factory=list)  # tables and CSVs new or changed by the remake

    def summary(self) -> str:
        def listed(names: list[str]) -> str:
            return f"{len(names)} ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})" if names else "0"

        return (f"[{self.study}] runs added: {listed(self.added)}; replaced: {listed(self.replaced)}; "
                f"tables changed: {listed(self.tables)}")


def study_of(pack: Path, studies: dict[str, Study]) -> Study:
    """The study a pack belongs to, by its file name (``<study>.tar.xz``)."""
    name = pack.name[:-len(SUFFIX)] if pack.name.endswith(SUFFIX) else None
    if name not in studies or studies[name].archive is None:
        raise UserError(f"{pack}: not a wave's pack (expected <study>{SUFFIX} of a study with an archive)")
    return studies[name]


def _members(pack: Path, archive: PurePosixPath) -> list[tuple[tarfile.TarInfo, PurePosixPath]]:
    """Each member with where it goes (relative to the checkout), all checked before any is written."""
    try:
        with tarfile.open(pack, "r:xz") as tar:
            members = tar.getmembers()
    except (OSError, tarfile.TarError, EOFError) as err:
        raise UserError(f"{pack}: cannot read the pack ({err})") from None
    placed = []
    for member in members:
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts or not member.isfile():
            raise UserError(f"{pack}: member '{member.name}' is not a plain file inside the pack; nothing written")
        if path.parts[0] == LOGS:
            placed.append((member, PurePosixPath("runs", "gpu-logs", *path.parts[1:])))
        elif path.is_relative_to(archive) and len(path.parts) > len(archive.parts) + 1:
            placed.append((member, path))
        else:
            raise UserError(f"{pack}: member '{member.name}' lies outside the study's archive {archive}; nothing written")
    return placed


def _tables(archive: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(archive.glob("*")) if p.suffix in (".md", ".csv") and p.is_file()}


def unpack(pack: Path, root: Path, studies: dict[str, Study], tables: bool = True) -> Unpacked:
    """One pack into its study's archive under ``root``, then (``tables``) that study's tables remade."""
    study = study_of(pack, studies)
    archive = study.archive if study.archive.is_absolute() else root / study.archive
    relative = PurePosixPath(archive.resolve().relative_to(root.resolve()).as_posix())
    placed = _members(pack, relative)
    check_archive_layout(archive)
    before_runs = {run.name: {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
                   for run in ArchiveDir(archive).runs()}
    before_tables = _tables(archive)
    result = Unpacked(study.name)
    runs_in_pack: dict[str, dict[Path, bytes]] = {}
    with tarfile.open(pack, "r:xz") as tar:
        for member, target in placed:
            data = tar.extractfile(member).read()
            atomic_write(root / target, lambda f, data=data: f.write(data))
            if target.parts[:len(relative.parts)] == relative.parts and target.parts[len(relative.parts)] != ArchiveDir(archive).testsets.name:
                run = target.parts[len(relative.parts)]
                runs_in_pack.setdefault(run, {})[Path(*target.parts[len(relative.parts) + 1:])] = data
    for run, files in sorted(runs_in_pack.items()):
        if run not in before_runs:
            result.added.append(run)
        elif any(before_runs[run].get(path) != data for path, data in files.items()):
            result.replaced.append(run)
    if tables:
        with contextlib.redirect_stdout(io.StringIO()):  # the tables themselves: read them in the archive
            write_archive_tables(study)
        after = _tables(archive)
        result.tables = [name for name, data in after.items() if before_tables.get(name) != data]
    return result
