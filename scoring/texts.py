"""An evaluation's texts — sources, references, hypotheses — wherever they are kept: a run's own
``eval/<test set>/`` folder holds all three; a study's archive keeps the hypotheses (gzip) beside
the record and each test set once in its ``testsets/`` folder, joined sets rebuilt from it
(``experiment.run_dir`` shows both layouts). The record's checksums say which stored texts a run
was scored against, and are checked on every read from an archive.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from data.concatenated import base_testset, concatenate, group_size
from data.parallel_text import read_lines
from experiment.run_dir import ArchiveDir, EvalFiles, RunDir
from scoring.metrics import References
from scoring.record import EvalRecord, read_record
from utils.errors import UserError


def text_digest(lines: Sequence[str]) -> str:
    """SHA-256 of ``lines`` as a text file holds them, one per line (hex)."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def stored_tag(sources_sha256: str, references_sha256: str) -> str:
    """The tag of a stored test set's file names: 8 hex digits of its two checksums."""
    return hashlib.sha256(f"{sources_sha256} {references_sha256}".encode()).hexdigest()[:8]


@dataclass
class Shelf:
    """What one load of runs shares between them: the stored test sets it has read (path of the sources,
    of the references, k -> the two sides and their checksums; an archive's runs share each, so it is
    read and joined once), and each test set's references for BLEU, tokenized once for all the runs
    scored on them (``references``)."""

    stored: dict[tuple[str, str, int], tuple[list[str], list[str], str, str]] = field(default_factory=dict)
    tokenized: dict[tuple[str, ...], References] = field(default_factory=dict)

    def references(self, lines: list[str]) -> References:
        """The ``References`` of these lines, one object for every evaluation of this load that has them."""
        key = tuple(lines)
        if key not in self.tokenized:
            self.tokenized[key] = References(lines)
        return self.tokenized[key]


def _stored_pair(src: Path, ref: Path, k: int, shelf: Shelf | None) -> tuple[list[str], list[str], str, str]:
    key = (str(src), str(ref), k)
    if shelf is not None and key in shelf.stored:
        return shelf.stored[key]
    sources, references = read_lines(src), read_lines(ref)
    if k > 1:
        sources, references = (list(side) for side in concatenate(sources, references, k))
    found = (sources, references, text_digest(sources), text_digest(references))
    if shelf is not None:
        shelf.stored[key] = found
    return found


def stored_texts(archive: Path, testset: str, sources_sha256: str | None,
                 references_sha256: str | None, shelf: Shelf | None = None) -> tuple[list[str], list[str]] | None:
    """The sources and references of ``testset`` (``<split>_concat<k>``: rebuilt from ``<split>``)
    among the archive's stored test sets whose checksums are the given ones; None if none is
    (``shelf``: the sets a load has read already)."""
    folder = ArchiveDir(archive)
    for tag in folder.tags(base_testset(testset)):
        src, ref = folder.stored(base_testset(testset), tag)
        sources, references, got_src, got_ref = _stored_pair(src, ref, group_size(testset), shelf)
        if (got_src, got_ref) == (sources_sha256, references_sha256):
            return list(sources), list(references)
    return None


def _test_set_side(run_dir: Path, testset: str, side: int, record: EvalRecord | None = None,
                   shelf: Shelf | None = None) -> list[str]:
    """The sources (``side`` 0) or references (1) of the run's evaluation on ``testset``: its own
    file where it keeps one, else the archive's stored test set its record's checksums name
    (``record``: the evaluation's, read already)."""
    files = _checked(RunDir(run_dir).evaluation(testset))
    own = (files.sources, files.references)[side]
    if own.is_file():
        return read_lines(own)
    record = read_record(files.record) if record is None else record
    if record.sources_sha256 is None or record.references_sha256 is None:
        raise UserError(f"{files.folder} keeps neither its {own.name} nor the checksums that find its test set in "
                        f"the archive")
    found = stored_texts(Path(run_dir).parent, testset, record.sources_sha256, record.references_sha256, shelf)
    if found is None:
        raise UserError(f"{files.folder}: no test set stored under {ArchiveDir(Path(run_dir).parent).testsets} "
                        f"matches its record's checksums (sources {record.sources_sha256[:12]}…)")
    return found[side]


def no_results(run_dir: Path, testset: str) -> UserError:
    """The error for a run without results on ``testset``, with its remedy: a trained run is tested
    (``python -m nmt test --run DIR --split NAME``); an archived one keeps no model, so it names the
    test sets it was scored on."""
    run = RunDir(run_dir)
    if run.tokenizer.exists():
        return UserError(f"{run_dir} has no results for test set '{testset}' "
                         f"(run: python -m nmt test --run {run_dir} --split {testset})")
    folder = run.evaluations
    scored = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return UserError(f"{run_dir} has no results for test set '{testset}', and as an archived run (no tokenizer, no "
                     f"checkpoints) it cannot be tested again: its test sets are {', '.join(scored) or 'none'}")


def _checked(files: EvalFiles) -> EvalFiles:
    if not files.record.is_file():
        raise no_results(files.folder.parent.parent, files.folder.name)
    return files


def sources_of(run_dir: Path, testset: str) -> list[str]:
    """The sources the run translated on ``testset``."""
    return _test_set_side(Path(run_dir), testset, 0)


def references_of(run_dir: Path, testset: str) -> list[str]:
    """The references the run's hypotheses on ``testset`` were scored against."""
    return _test_set_side(Path(run_dir), testset, 1)


def hypotheses_of(run_dir: Path, testset: str) -> list[str]:
    """The run's hypotheses on ``testset`` (plain, or gzip as an archive keeps them)."""
    files = _checked(RunDir(run_dir).evaluation(testset))
    if files.hypotheses.is_file():
        return read_lines(files.hypotheses)
    if files.compressed_hypotheses.is_file():
        return read_lines(files.compressed_hypotheses)
    raise UserError(f"{files.folder} holds no hypotheses ({files.hypotheses.name} or {files.compressed_hypotheses.name})")


def evaluation_texts(run_dir: Path, testset: str, record: EvalRecord,
                     shelf: Shelf | None = None) -> tuple[list[str] | UserError, list[str], list[str]]:
    """The run's sources, references and hypotheses on ``testset`` (``record``: its evaluation's), each
    read once; sources that cannot be found are the error saying so (a table that needs no sources
    reads the run all the same)."""
    try:
        sources: list[str] | UserError = _test_set_side(Path(run_dir), testset, 0, record, shelf)
    except UserError as err:
        sources = err
    return sources, _test_set_side(Path(run_dir), testset, 1, record, shelf), hypotheses_of(run_dir, testset)
