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


# measured on the official task-1 raw files (train 29,000 pairs, val 1,014, the 2016 and 2017 Flickr test sets
# 1,000 each; the fresh sets no study's results were read on before the confirmatory pair, test_2017_mscoco 461
# and test_2018_flickr 1,071)
MULTI30K_FILES = (
    CorpusFile("train.fr.gz", "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d", 29000, 604),
    CorpusFile("train.en.gz", "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6", 29000, 569),
    CorpusFile("val.fr.gz", "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc", 1014, 23),
    CorpusFile("val.en.gz", "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227", 1014, 22),
    CorpusFile("test_2016_flickr.fr.gz", "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6", 1000, 22),
    CorpusFile("test_2016_flickr.en.gz", "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182", 1000, 21),
    CorpusFile("test_2017_flickr.fr.gz", "6f3764e31dac41e9455e612958bcfd4e877c5e15cd66df2c2b2be6d9bd83e5b6", 1000, 20),
    CorpusFile("test_2017_flickr.en.gz", "ce1450ddc5ab0834502579d77a170849952e15a2938b34cc503bdc25ebb4fb98", 1000, 19),
    CorpusFile("test_2017_mscoco.fr.gz", "39cde3f43f32b0a6bf29ce4917a46329ff32e53070c2fac87506695a740ae0a0", 461, 10),
    CorpusFile("test_2017_mscoco.en.gz", "43051fdfa86fd5395182e718a94ca67b1b227b9f7c79596ff0f6b813216981d2", 461, 9),
    CorpusFile("test_2018_flickr.fr.gz", "234b4a887da0da4801a3e2c6f21336231ff7dd46daeb80cfa1b551c8bbb78239", 1071, 25),
    CorpusFile("test_2018_flickr.en.gz", "4e585c2dd525911a6ea7730e9d0b516239af3f1b1ffae6a2130223cfb639f25e", 1071, 23),
)
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
