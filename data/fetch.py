"""Getting a real corpus onto a fresh machine: ``python -m nmt data fetch multi30k`` (``make data``).

Multi30k task 1 (Elliott et al. 2016, 2017), French-English, raw: the files the multi30k/dataset
repository holds under data/task1/raw, one sentence per line, gzip-compressed. Each file is checked
against the SHA-256 of its *decompressed* text (gzip headers carry names and times that differ between
copies of the same text) and its line count before it is moved into place: a file that differs is
an error naming it and nothing is written. A file already in place with the right text is kept.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from utils.errors import UserError
from utils.io import atomic_write

MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
# the environment variable a config's data.dir names a corpus by, and the folder `make data` fills when the
# variable is not set: relative to the folder commands run in, the checkout's root (git-ignored there)
DATA_FOLDERS = {"MULTI30K_DIR": Path("datasets") / "multi30k-fr-en"}


def data_folder(variable: str) -> Path:
    """Where ``variable``'s corpus is, in this order: the folder the environment variable names (set and
    not empty), else the folder ``make data`` fills (``DATA_FOLDERS``)."""
    return Path(os.environ.get(variable) or DATA_FOLDERS[variable])


@dataclass(frozen=True)
class CorpusFile:
    name: str
    text_sha256: str  # of the decompressed text
    lines: int
    size_kb: int  # the compressed file, as multi30k/dataset serves it (about)


def read_checksums(path: Path) -> tuple[CorpusFile, ...]:
    """The files a checksum list names (``SHA256 LINES SIZE_KB NAME`` a line, ``#`` comments), in its order;
    a line of another form is a one-line error naming it."""
    files = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 4 or len(fields[0]) != 64 or not fields[1].isdigit() or not fields[2].isdigit():
            raise UserError(f"{path}:{number}: not 'SHA256 LINES SIZE_KB NAME': {line.strip()}")
        files.append(CorpusFile(fields[3], fields[0], int(fields[1]), int(fields[2])))
    return tuple(files)


MULTI30K_FILES = read_checksums(Path(__file__).with_name("multi30k.sha256"))
CORPORA = {"multi30k": (MULTI30K_URL, MULTI30K_FILES)}


def text_digest(data: bytes) -> tuple[str, int] | None:
    """(SHA-256 of the decompressed text, its line count) of gzip ``data``; None when it is not gzip."""
    try:
        text = gzip.decompress(data)
    except (OSError, EOFError):
        return None
    return hashlib.sha256(text).hexdigest(), text.count(b"\n")


def _mismatch(found: tuple[str, int] | None, wanted: CorpusFile) -> str:
    """What differs between a file's (digest, lines) and the expected ones, in words."""
    what = "not gzip" if found is None else f"text SHA-256 {found[0][:12]}…, {found[1]} lines"
    return f"not the expected file ({what}; expected {wanted.text_sha256[:12]}…, {wanted.lines} lines)"


def _download(url: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (https or a file:// mirror)
            return response.read()
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or err
        raise ConnectionError(f"{url}: {reason}") from None


def fetch(corpus: str, into: Path, mirror: str | None = None, timeout: float = 60.0, report=print) -> list[Path]:
    """The files of ``corpus`` in ``into``, fetched from ``mirror`` (a URL ending in /; default the
    corpus's official location) where missing or different, each checked before it is moved into
    place. Unreachable: a ``UserError`` saying which files to put where; a file that does not match its
    checksum: a ``UserError`` naming it (the files already checked stay)."""
    base, files = CORPORA[corpus]
    if mirror:
        base = mirror if mirror.endswith("/") else mirror + "/"
    done = []
    for wanted in files:
        path = into / wanted.name
        present = text_digest(path.read_bytes()) if path.is_file() else None
        if present == (wanted.text_sha256, wanted.lines):
            report(f"  {wanted.name}: already there (checked)")
            done.append(path)
            continue
        if path.is_file():
            report(f"  {wanted.name}: in place but {_mismatch(present, wanted)}; fetching the official one")
        try:
            data = _download(base + wanted.name, timeout)
        except ConnectionError as err:
            if path.is_file():
                raise UserError(f"{path}: {_mismatch(present, wanted)}, and the official file cannot be fetched "
                                f"({err}); replace it with multi30k/dataset's data/task1/raw/{wanted.name}") from None
            names = ", ".join(f.name for f in files)
            raise UserError(f"cannot fetch {err}; without a network, put the {len(files)} files {names} "
                            f"(multi30k/dataset, data/task1/raw) into {into} and run this again to check them") from None
        found = text_digest(data)
        if found != (wanted.text_sha256, wanted.lines):
            raise UserError(f"{base + wanted.name}: {_mismatch(found, wanted)}; nothing written for it")
        atomic_write(path, lambda f, data=data: f.write(data))
        report(f"  {wanted.name}: fetched ({len(data) / 1024:.0f} kB, {wanted.lines:,} lines, checked)")
        done.append(path)
    return done
