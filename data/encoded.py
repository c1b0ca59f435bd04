"""Tokenized splits, cached on disk by fingerprint.

An ``EncodedSplit`` stores each side as one flat int32 array plus offsets. Splits are tokenized
in chunks straight into a cache folder of raw arrays, which are memory-mapped when read: a split
of IWSLT2017 size (232,825 pairs) is a few MB, and one larger than memory still fits. Each array's
size and CRC-32 are recorded in the folder's ``meta.json`` and checked on every load; a damaged
folder is encoded again with one warning.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from data.corpus import ParallelSplit
from utils.errors import DataError

log = logging.getLogger(__name__)

# 3: meta.json records each array's bytes and CRC-32, checked on every load (2: a folder of raw,
# memory-mapped arrays without them; 1: one .npz)
CACHE_VERSION = "3"


@dataclass
class EncodedSplit:
    """Token ids of one split; pair i is ``src_tokens[src_offsets[i]:src_offsets[i+1]]`` etc.

    ``index`` maps each kept pair to its line in the original split (training splits may drop
    pairs; evaluation splits keep all, so ``index == arange(n)``).
    """

    name: str
    src_tokens: np.ndarray  # (N_src_tokens,) int32
    src_offsets: np.ndarray  # (n + 1,) int64
    tgt_tokens: np.ndarray
    tgt_offsets: np.ndarray
    index: np.ndarray  # (n,) int64
    folder: Path | None = None  # the cache folder the arrays are memory-mapped from, if any

    def __len__(self) -> int:
        return len(self.index)

    def __reduce__(self):
        # A memory-mapped split travels to DataLoader workers started with "spawn" (macOS's and
        # Windows' default) as its folder, mapped again there; pickled as arrays, every worker
        # would get a private copy of the whole split.
        if self.folder is not None:
            return _read_encoded, (self.name, self.folder)
        return super().__reduce__()

    @property
    def src_lengths(self) -> np.ndarray:
        """(n,) int32."""
        return _lengths(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        """(n,) int32."""
        return _lengths(self.tgt_offsets)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return (self.src_tokens[self.src_offsets[i]:self.src_offsets[i + 1]],
                self.tgt_tokens[self.tgt_offsets[i]:self.tgt_offsets[i + 1]])


ENCODE_CHUNK = 50_000  # sentences tokenized at once: memory stays bounded whatever the split's size
ARRAYS = ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets", "index")
DTYPES = {"src_tokens": np.int32, "tgt_tokens": np.int32, "src_offsets": np.int64, "tgt_offsets": np.int64,
          "index": np.int64}


def _lengths(offsets: np.ndarray) -> np.ndarray:
    """(n,) int32 lengths from (n + 1,) offsets, computed in chunks (no int64 copy of a large split)."""
    n = len(offsets) - 1
    lengths = np.empty(max(n, 0), dtype=np.int32)
    for start in range(0, n, ENCODE_CHUNK):
        stop = min(n, start + ENCODE_CHUNK)
        np.subtract(offsets[start + 1:stop + 1], offsets[start:stop], out=lengths[start:stop], casting="unsafe")
    return lengths


def _write_encoded(split: ParallelSplit, tokenizer, max_len: int | None, folder: Path) -> None:
    """The encoded split as raw arrays in ``folder`` (``<name>.bin`` + ``meta.json``).

    Tokenizes ``ENCODE_CHUNK`` sentences at a time and appends each chunk's kept token ids
    (int32), running offsets (int64) and original line numbers (int64) to the files, so nothing
    of the split is ever held whole in memory."""
    files = {name: open(folder / f"{name}.bin", "wb") for name in ARRAYS}
    try:
        ends = {"src": 0, "tgt": 0}
        for side in ends:
            np.zeros(1, dtype=np.int64).tofile(files[f"{side}_offsets"])
        for start in range(0, len(split), ENCODE_CHUNK):
            encoded = {"src": tokenizer.encode_src(list(split.src[start:start + ENCODE_CHUNK])),
                       "tgt": tokenizer.encode_tgt(list(split.tgt[start:start + ENCODE_CHUNK]))}
            lengths = {side: np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
                       for side, seqs in encoded.items()}
            keep = (np.ones(len(lengths["src"]), dtype=bool) if max_len is None
                    else (lengths["src"] <= max_len) & (lengths["tgt"] <= max_len))
            for side, seqs in encoded.items():
                kept = seqs if keep.all() else [seqs[i] for i in np.flatnonzero(keep)]
                np.fromiter(chain.from_iterable(kept), dtype=np.int32).tofile(files[f"{side}_tokens"])
                offsets = ends[side] + np.cumsum(lengths[side][keep])
                offsets.tofile(files[f"{side}_offsets"])
                ends[side] = int(offsets[-1]) if len(offsets) else ends[side]
            (start + np.flatnonzero(keep)).astype(np.int64).tofile(files["index"])
    finally:
        for f in files.values():
            f.close()
    sizes = {name: (folder / f"{name}.bin").stat().st_size // np.dtype(DTYPES[name]).itemsize for name in ARRAYS}
    if sizes["index"] < len(split):
        log.info("split %s: dropped %d of %d pairs longer than %d tokens",
                 split.name, len(split) - sizes["index"], len(split), max_len)
    files = {name: {"bytes": (folder / f"{name}.bin").stat().st_size, "crc32": file_crc32(folder / f"{name}.bin")}
             for name in ARRAYS}
    (folder / "meta.json").write_text(json.dumps({"version": CACHE_VERSION, "sizes": sizes, "files": files}) + "\n",
                                      encoding="utf-8")


def file_crc32(path: Path, chunk: int = 1 << 24) -> int:
    """CRC-32 of a file, read 16 MiB at a time (about 1 s per GB here: cheap beside training)."""
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(chunk):
            crc = zlib.crc32(block, crc)
    return crc


def cache_problem(folder: Path) -> str | None:
    """None when the cached split in ``folder`` is whole, else what is wrong with it: a missing or
    unreadable meta.json, another cache version, or an array whose size or CRC-32 differs from
    what was recorded when it was written (truncated, overwritten, or another split's file)."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "meta.json is missing or unreadable"
    if not isinstance(meta, dict) or meta.get("version") != CACHE_VERSION or not isinstance(meta.get("files"), dict):
        return f"cache version {meta.get('version') if isinstance(meta, dict) else None!r}, expected {CACHE_VERSION!r}"
    for name in ARRAYS:
        path, recorded = folder / f"{name}.bin", meta["files"].get(name) or {}
        try:
            size = path.stat().st_size
        except OSError:
            return f"{name}.bin is missing"
        if size != recorded.get("bytes") or size != meta["sizes"].get(name, -1) * np.dtype(DTYPES[name]).itemsize:
            return f"{name}.bin has {size} bytes, {recorded.get('bytes')} were written"
        if file_crc32(path) != recorded.get("crc32"):
            return f"{name}.bin does not match its checksum"
    return None


def _read_encoded(name: str, folder: Path) -> EncodedSplit:
    """An encoded split whose arrays are memory-mapped read-only from ``folder``."""
    sizes = json.loads((folder / "meta.json").read_text(encoding="utf-8"))["sizes"]
    arrays = {a: (np.memmap(folder / f"{a}.bin", dtype=DTYPES[a], mode="r", shape=(sizes[a],)) if sizes[a]
                  else np.zeros(0, dtype=DTYPES[a])) for a in ARRAYS}
    return EncodedSplit(name, **arrays, folder=folder)


def encode_split(split: ParallelSplit, tokenizer, max_len: int | None) -> EncodedSplit:
    """Tokenize a split; with ``max_len`` (training) drop pairs longer than it on either side.

    ``max_len`` counts subword tokens without bos/eos. Dropped pairs are counted in the log. (In
    memory; ``load_or_encode`` streams through a cache folder instead.)
    """
    with tempfile.TemporaryDirectory() as folder:
        _write_encoded(split, tokenizer, max_len, Path(folder))
        encoded = _read_encoded(split.name, Path(folder))
        return EncodedSplit(split.name, *(np.array(getattr(encoded, a)) for a in ARRAYS))  # no folder: in memory


def encoded_fingerprint(split: ParallelSplit, tokenizer, max_len: int | None) -> str:
    key = "|".join([CACHE_VERSION, split.fingerprint(), tokenizer.fingerprint(), str(max_len)])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def load_or_encode(split: ParallelSplit, tokenizer, max_len: int | None,
                   cache_dir: Path | None) -> EncodedSplit:
    """``encode_split`` with an on-disk cache keyed by data, tokenizer and ``max_len``: a folder of
    raw arrays, written chunk by chunk (whole or not at all) and memory-mapped when read, so a
    split larger than memory is encoded and used within bounded memory."""
    if cache_dir is None:
        return encode_split(split, tokenizer, max_len)
    folder = Path(cache_dir) / "encoded" / f"{split.name}-{encoded_fingerprint(split, tokenizer, max_len)}"
    if folder.exists():
        problem = cache_problem(folder)
        if problem is None:
            return _read_encoded(split.name, folder)
        log.warning("cache %s is damaged (%s): rebuilding it from its source", folder, problem)
        shutil.rmtree(folder, ignore_errors=True)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    except OSError as err:
        raise DataError(f"cannot write cache folder {folder.parent}: {err.strerror or err}; set data.cache_dir "
                        f"to a folder you may write to") from None
    try:
        _write_encoded(split, tokenizer, max_len, staging)
        try:
            os.replace(staging, folder)
        except OSError:
            if not (folder / "meta.json").is_file():  # else another process finished it first
                raise
    except OSError as err:
        raise DataError(f"cannot write cache folder {folder}: {err.strerror or err}; free space or set "
                        f"data.cache_dir to another folder") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _read_encoded(split.name, folder)
