"""Writing a study's archive (the layout: ``experiment.run_dir``): a finished run's small files,
each test set stored once, the hypotheses compressed — and the migration of an archive of the
layout before, where every run kept its own copy of every test set.

``archive_run`` and ``migrate_archive`` write an evaluation the same way (``archive_evaluation``):
the record with its texts' checksums, the hypotheses as ``hyps.txt.gz`` (gzip without a time
stamp: the same hypotheses give the same bytes), and for a plain test set its sources and
references under ``testsets/`` unless an identical copy is there. A joined set
(``<split>_concat<k>``) is checked against the stored ``<split>`` rebuilt and never stored. Every
file is written atomically, and a migrated evaluation loses its own copies only once everything
it needs is written, so a migration stopped at any point is finished by running it again.
"""
from __future__ import annotations

import dataclasses
import gzip
import shutil
from dataclasses import dataclass
from pathlib import Path

from data.concatenated import group_size
from data.parallel_text import read_lines
from experiment.marian import marian_config
from experiment.run_dir import ArchiveDir, EvalFiles, RunDir, check_archive_layout
from scoring.record import EvalRecord, read_record, write_record
from scoring.texts import stored_tag, stored_texts, text_digest
from utils.errors import UserError
from utils.io import atomic_write


def compress(text: str) -> bytes:
    """``text`` as gzip with no name or time stamp, so equal texts give equal bytes."""
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def _write_if_changed(path: Path, data: bytes) -> None:
    if not (path.is_file() and path.read_bytes() == data):
        atomic_write(path, lambda f: f.write(data))


def archive_evaluation(source: EvalFiles, target: EvalFiles, archive: Path) -> EvalRecord:
    """One evaluation of ``source`` (a run's own ``eval/<test set>/``, sources and references beside
    the hypotheses) written into ``target`` in the archive's layout; returns the record written.

    Refused in one line: an evaluation without its texts, texts that do not match its record's
    checksums, or a joined set whose plain set the archive does not hold with these texts."""
    testset = source.folder.name
    hypotheses = next((p for p in (source.hypotheses, source.compressed_hypotheses) if p.is_file()), None)
    if not (source.sources.is_file() and source.references.is_file() and hypotheses):
        raise UserError(f"{source.folder} lacks its sources, references or hypotheses: cannot archive it")
    record = read_record(source.record)
    sources, references = read_lines(source.sources), read_lines(source.references)
    digests = text_digest(sources), text_digest(references)
    if record.sources_sha256 is not None and (record.sources_sha256, record.references_sha256) != digests:
        raise UserError(f"{source.folder}: the sources or references differ from those its record was scored on")
    record = dataclasses.replace(record, sources_sha256=digests[0], references_sha256=digests[1])
    folder = ArchiveDir(archive)
    if group_size(testset) == 1:
        src, ref = folder.stored(testset, stored_tag(*digests))
        _write_if_changed(src, "".join(line + "\n" for line in sources).encode("utf-8"))
        _write_if_changed(ref, "".join(line + "\n" for line in references).encode("utf-8"))
    elif stored_texts(archive, testset, *digests) is None:
        raise UserError(f"{source.folder}: a joined test set whose plain set the archive does not hold (or holds with "
                        f"other texts); archive the run's plain test set first")
    _write_if_changed(target.compressed_hypotheses, compress("".join(f"{h}\n" for h in read_lines(hypotheses))))
    write_record(target.record, record)
    if target.folder != source.folder:
        for stale in (target.hypotheses, target.sources, target.references):
            stale.unlink(missing_ok=True)
    return record


def _evaluation_order(evaluations: Path) -> list[Path]:
    """A run's evaluation folders, the plain sets first (a joined set is checked against its plain one)."""
    folders = [f for f in sorted(evaluations.iterdir()) if f.is_dir()] if evaluations.is_dir() else []
    return sorted(folders, key=lambda f: group_size(f.name))


def archive_run(run_dir: Path, target: Path) -> None:
    """Copy the small files of a finished, evaluated run (config, manifest, metrics) into its folder
    ``target`` of an archive (``target.parent``), and its evaluations in the archive's layout."""
    archive = Path(target).parent
    check_archive_layout(archive)
    source, copy = RunDir(run_dir), RunDir(target)
    copy.path.mkdir(parents=True, exist_ok=True)
    for path in [*source.archived, *marian_config(run_dir)]:  # a pretrained row's config.json names its row
        if path.is_file():
            target_file = copy.path / path.relative_to(source.path)
            target_file.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target_file)
    for folder in _evaluation_order(source.evaluations):
        archive_evaluation(EvalFiles(folder), copy.evaluation(folder.name), archive)


@dataclass(frozen=True)
class Migration:
    """What migrating one archive did."""

    archive: Path
    evaluations: int  # evaluation folders moved to the new layout
    bytes_before: int  # of every file under the archive
    bytes_after: int

    def summary(self) -> str:
        mib = 1024 * 1024
        return (f"{self.archive}: {self.evaluations} evaluations migrated, {self.bytes_before / mib:.1f} MiB -> "
                f"{self.bytes_after / mib:.1f} MiB")


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def migrate_archive(archive: Path) -> Migration:
    """Move every evaluation of ``archive`` that keeps its own test set to the layout with
    ``testsets/`` (module doc); an archive in the layout already is left as it is."""
    archive = Path(archive)
    if not ArchiveDir(archive).runs():
        raise UserError(f"{archive} holds no archived run (a folder with config.yaml)")
    before, count = _size(archive), 0
    for run in ArchiveDir(archive).runs():
        for folder in _evaluation_order(RunDir(run).evaluations):
            files = EvalFiles(folder)
            plain = (files.sources, files.references, files.hypotheses)
            if not any(p.is_file() for p in plain):
                continue
            if all(p.is_file() for p in plain) or not _archived(files, archive):
                archive_evaluation(files, files, archive)
            for path in plain:  # only once everything the evaluation needs is written
                path.unlink(missing_ok=True)
            count += 1
    return Migration(archive, count, before, _size(archive))


def _archived(files: EvalFiles, archive: Path) -> bool:
    """Whether an evaluation's record, hypotheses and test set are in the archive's layout already
    (a migration stopped while it removed the evaluation's own copies)."""
    record = read_record(files.record)
    return files.compressed_hypotheses.is_file() and record.sources_sha256 is not None and stored_texts(
        archive, files.folder.name, record.sources_sha256, record.references_sha256) is not None

