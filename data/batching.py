"""Tokenized splits (cached on disk by fingerprint), token-budget batching and padding.

An ``EncodedSplit`` stores each side as one flat int32 array plus offsets. Splits are tokenized
in chunks straight into a cache folder of raw arrays, which are memory-mapped when read: a split
of IWSLT2017 size (232,825 pairs) is a few MB, and one larger than memory still fits.

Batches: ``TokenBatchSampler`` sorts sentences by length (ties broken by a seeded shuffle),
cuts the sorted order into batches whose padded size (sentences x longest side, bos/eos
included) stays within ``max_tokens`` (or a fixed sentence count), then shuffles the batch order
per epoch with ``seed + epoch``. Under data parallelism each rank takes every world_size-th
batch of the same list. ``collate`` pads to (B, S) source and (B, T) target tensors.
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
from typing import Iterator, Sequence

import numpy as np
import torch

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


class PairDataset(torch.utils.data.Dataset):
    """Map-style dataset over an ``EncodedSplit``: item i is (source ids, target ids)."""

    def __init__(self, split: EncodedSplit):
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> tuple[int, np.ndarray, np.ndarray]:
        return (i, *self.split.pair(i))


class Batches(Sequence[list[int]]):
    """Batches of sentence indices held as two arrays — the length-sorted order (n,) and each
    batch's start in it — instead of n Python ints in lists (at 40 million pairs that is the
    difference between 0.3 GB and several). Item i is batch i as a list of indices."""

    def __init__(self, order: np.ndarray, starts: np.ndarray):
        self.order, self.starts = order, starts
        self.ends = np.append(starts[1:], len(order)).astype(np.int64)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> list[int]:
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.order[self.starts[i]:self.ends[i]].tolist()


SORT_CHUNK = 1_000_000  # indices placed at once by the length sort


def _length_order(src_lengths: np.ndarray, tgt_lengths: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """Indices sorted by (source length, target length, ``tiebreak``): the order of
    ``np.lexsort((tiebreak, tgt_lengths, src_lengths))`` for a permutation ``tiebreak``.

    A counting sort on the length pair, a chunk at a time: besides ``tiebreak`` the only arrays
    of the split's size are two int32 index arrays, where lexsort and argsort keep 3–4 int64
    ones (over 1 GB at 40 million pairs)."""
    n = len(src_lengths)
    index_type = np.int32 if n < 2 ** 31 else np.int64
    by_tiebreak = np.empty(n, dtype=index_type)  # the indices in increasing tiebreak order
    for start in range(0, n, SORT_CHUNK):
        by_tiebreak[tiebreak[start:start + SORT_CHUNK]] = np.arange(start, min(n, start + SORT_CHUNK),
                                                                    dtype=index_type)
    width = int(tgt_lengths.max(initial=0)) + 1
    n_keys = (int(src_lengths.max(initial=0)) + 1) * width

    def keys(start: int) -> np.ndarray:
        chunk = by_tiebreak[start:start + SORT_CHUNK]
        return src_lengths[chunk].astype(np.int64) * width + tgt_lengths[chunk]

    # where each key's run starts in the output, then each chunk placed stably after the last
    next_free = np.zeros(n_keys, dtype=np.int64)
    for start in range(0, n, SORT_CHUNK):
        next_free += np.bincount(keys(start), minlength=n_keys)
    next_free = np.concatenate([[0], np.cumsum(next_free)[:-1]])
    order = np.empty(n, dtype=index_type)
    for start in range(0, n, SORT_CHUNK):
        key = keys(start)
        local = np.argsort(key, kind="stable")
        sorted_key = key[local]
        rank = np.arange(len(key)) - np.searchsorted(sorted_key, sorted_key, side="left")
        order[next_free[sorted_key] + rank] = by_tiebreak[start:start + SORT_CHUNK][local]
        next_free += np.bincount(key, minlength=n_keys)
    return order


def make_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_tokens: int,
                 batch_size: int = 0, seed: int = 0) -> Batches:
    """Group sentence indices into length-bucketed batches.

    With ``batch_size`` > 0 each batch holds that many sentences; otherwise a batch grows while
    ``n_sentences * (longest side + 1)`` stays within ``max_tokens`` (+1 for bos or eos). A
    sentence that alone exceeds the budget gets a batch of its own.
    """
    n = len(src_lengths)
    rng = np.random.default_rng(seed)
    order = _length_order(src_lengths, tgt_lengths, rng.permutation(n))
    if batch_size > 0:
        return Batches(order, np.arange(0, n, batch_size, dtype=np.int64))
    starts = []
    start = 0
    while start < n:
        # Sorted ascending: the batch's width is the width of its last sentence's longest side.
        window = order[start:start + max_tokens]
        width = np.maximum.accumulate(np.maximum(src_lengths[window], tgt_lengths[window]) + 1)
        fits = width * np.arange(1, len(width) + 1) <= max_tokens
        size = max(1, int(np.argmin(fits)) if not fits.all() else len(width))
        starts.append(start)
        start += size
    return Batches(order, np.asarray(starts, dtype=np.int64))


class TokenBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Length-bucketed batches under a token budget, reshuffled each epoch, sharded by rank.

    The batch list is fixed by (lengths, max_tokens, batch_size, seed); each epoch visits it in
    the order ``permutation(seed + epoch)``. ``set_epoch`` selects the epoch and ``start_at``
    skips already-consumed batches (exact resume in the middle of an epoch).
    """

    def __init__(self, src_lengths: Sequence[int], tgt_lengths: Sequence[int], max_tokens: int,
                 batch_size: int = 0, shuffle: bool = True, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0):
        self.batches = make_batches(np.asarray(src_lengths), np.asarray(tgt_lengths),
                                    max_tokens, batch_size, seed)
        self.shuffle, self.seed = shuffle, seed
        self.num_replicas, self.rank = num_replicas, rank
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def start_at(self, batch_index: int) -> None:
        """Skip the first ``batch_index`` batches of the current epoch (this rank's count)."""
        self.start = batch_index

    def _epoch_order(self) -> np.ndarray:
        """This rank's batch numbers for the current epoch, in visiting order."""
        order = (np.random.default_rng(self.seed + self.epoch).permutation(len(self.batches))
                 if self.shuffle else np.arange(len(self.batches)))
        per_rank = len(order) // self.num_replicas if self.num_replicas > 1 else len(order)
        return order[self.rank::self.num_replicas][:per_rank]

    def __iter__(self) -> Iterator[list[int]]:
        mine = self._epoch_order()[self.start:]
        self.start = 0
        return (self.batches[int(i)] for i in mine)

    def __len__(self) -> int:
        return len(self.batches) // self.num_replicas if self.num_replicas > 1 else len(self.batches)


@dataclass
class Batch:
    """Padded tensors of one batch.

    src: (B, S) source ids followed by eos; tgt_in: (B, T) bos + target ids (decoder input);
    tgt_out: (B, T) target ids + eos (labels); padding is ``pad_id`` everywhere.
    ``indices``: (B,) positions of the pairs in their split. ``ntokens``: the number of real
    (non-padding) tokens in ``tgt_out``, counted by the collator on the host so that the training
    step never reads it back from the device; None for hand-made batches (then counted there).
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    indices: torch.Tensor
    ntokens: int | None = None

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        return Batch(*(t.to(device, non_blocking=non_blocking) for t in
                       (self.src, self.tgt_in, self.tgt_out, self.indices)), ntokens=self.ntokens)

    def pin_memory(self) -> "Batch":
        """Page-locked copies (the DataLoader calls this with ``pin_memory=True``), so that
        ``to(cuda, non_blocking=True)`` overlaps the copy with computation."""
        return Batch(*(t.pin_memory() for t in (self.src, self.tgt_in, self.tgt_out, self.indices)),
                     ntokens=self.ntokens)


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int, prefix: int | None = None,
                  suffix: int | None = None) -> torch.Tensor:
    """(B, T) LongTensor of right-padded sequences, each optionally wrapped in prefix/suffix."""
    start = int(prefix is not None)
    width = max((len(s) for s in seqs), default=0) + start + int(suffix is not None)
    out = np.full((len(seqs), width), pad_id, dtype=np.int64)
    for i, s in enumerate(seqs):
        if prefix is not None:
            out[i, 0] = prefix
        out[i, start:start + len(s)] = s
        if suffix is not None:
            out[i, start + len(s)] = suffix
    return torch.from_numpy(out)


class Collator:
    """Turns a list of (index, src ids, tgt ids) items into a ``Batch``."""

    def __init__(self, pad_id: int, bos_id: int, eos_id: int):
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id

    def __call__(self, items: list[tuple[int, np.ndarray, np.ndarray]]) -> Batch:
        srcs = [s for _, s, _ in items]
        tgts = [t for _, _, t in items]
        return Batch(
            src=pad_sequences(srcs, self.pad_id, suffix=self.eos_id),
            tgt_in=pad_sequences(tgts, self.pad_id, prefix=self.bos_id),
            tgt_out=pad_sequences(tgts, self.pad_id, suffix=self.eos_id),
            indices=torch.tensor([i for i, _, _ in items], dtype=torch.long),
            ntokens=sum(len(t) + 1 for t in tgts),  # each target and its eos
        )
