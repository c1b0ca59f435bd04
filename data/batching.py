"""Tokenized splits (cached on disk by fingerprint), token-budget batching and padding.

An ``EncodedSplit`` stores each side as one flat int32 array plus offsets, so a split of
IWSLT2017 size (232,825 pairs) is a few MB and loads instantly from its ``.npz`` cache.

Batches: ``TokenBatchSampler`` sorts sentences by length (ties broken by a seeded shuffle),
cuts the sorted order into batches whose padded size (sentences x longest side, bos/eos
included) stays within ``max_tokens`` (or a fixed sentence count), then shuffles the batch order
per epoch with ``seed + epoch``. Under data parallelism each rank takes every world_size-th
batch of the same list. ``collate`` pads to (B, S) source and (B, T) target tensors.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from data.corpus import ParallelSplit
from utils.io import atomic_write

log = logging.getLogger(__name__)

CACHE_VERSION = "1"


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

    def __len__(self) -> int:
        return len(self.index)

    @property
    def src_lengths(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return (self.src_tokens[self.src_offsets[i]:self.src_offsets[i + 1]],
                self.tgt_tokens[self.tgt_offsets[i]:self.tgt_offsets[i + 1]])


def _flatten(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.fromiter(chain.from_iterable(seqs), dtype=np.int32, count=int(offsets[-1]))
    return tokens, offsets


def _select(tokens: np.ndarray, offsets: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.diff(offsets)[keep]
    new_offsets = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    mask = np.repeat(np.isin(np.arange(len(offsets) - 1), keep), np.diff(offsets))
    return tokens[mask], new_offsets


def encode_split(split: ParallelSplit, tokenizer, max_len: int | None) -> EncodedSplit:
    """Tokenize a split; with ``max_len`` (training) drop pairs longer than it on either side.

    ``max_len`` counts subword tokens without bos/eos. Dropped pairs are counted in the log.
    """
    src_tokens, src_offsets = _flatten(tokenizer.encode_src(split.src))
    tgt_tokens, tgt_offsets = _flatten(tokenizer.encode_tgt(split.tgt))
    index = np.arange(len(split), dtype=np.int64)
    if max_len is not None:
        keep = np.flatnonzero((np.diff(src_offsets) <= max_len) & (np.diff(tgt_offsets) <= max_len))
        if len(keep) < len(index):
            log.info("split %s: dropped %d of %d pairs longer than %d tokens",
                     split.name, len(index) - len(keep), len(index), max_len)
            src_tokens, src_offsets = _select(src_tokens, src_offsets, keep)
            tgt_tokens, tgt_offsets = _select(tgt_tokens, tgt_offsets, keep)
            index = keep
    return EncodedSplit(split.name, src_tokens, src_offsets, tgt_tokens, tgt_offsets, index)


def encoded_fingerprint(split: ParallelSplit, tokenizer, max_len: int | None) -> str:
    key = "|".join([CACHE_VERSION, split.fingerprint(), tokenizer.fingerprint(), str(max_len)])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def load_or_encode(split: ParallelSplit, tokenizer, max_len: int | None,
                   cache_dir: Path | None) -> EncodedSplit:
    """``encode_split`` with an on-disk cache keyed by data, tokenizer and ``max_len``."""
    if cache_dir is None:
        return encode_split(split, tokenizer, max_len)
    path = Path(cache_dir) / "encoded" / f"{split.name}-{encoded_fingerprint(split, tokenizer, max_len)}.npz"
    if path.exists():
        with np.load(path) as z:
            return EncodedSplit(split.name, z["src_tokens"], z["src_offsets"],
                                z["tgt_tokens"], z["tgt_offsets"], z["index"])
    enc = encode_split(split, tokenizer, max_len)
    atomic_write(path, lambda f: np.savez(f, src_tokens=enc.src_tokens, src_offsets=enc.src_offsets,
                                          tgt_tokens=enc.tgt_tokens, tgt_offsets=enc.tgt_offsets, index=enc.index),
                 what="cache file")
    return enc


class PairDataset(torch.utils.data.Dataset):
    """Map-style dataset over an ``EncodedSplit``: item i is (source ids, target ids)."""

    def __init__(self, split: EncodedSplit):
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> tuple[int, np.ndarray, np.ndarray]:
        return (i, *self.split.pair(i))


def make_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_tokens: int,
                 batch_size: int = 0, seed: int = 0) -> list[list[int]]:
    """Group sentence indices into length-bucketed batches.

    With ``batch_size`` > 0 each batch holds that many sentences; otherwise a batch grows while
    ``n_sentences * (longest side + 1)`` stays within ``max_tokens`` (+1 for bos or eos). A
    sentence that alone exceeds the budget gets a batch of its own.
    """
    n = len(src_lengths)
    rng = np.random.default_rng(seed)
    longest = np.maximum(src_lengths, tgt_lengths) + 1
    order = np.lexsort((rng.permutation(n), tgt_lengths, src_lengths))
    batches: list[list[int]] = []
    if batch_size > 0:
        return [order[i:i + batch_size].tolist() for i in range(0, n, batch_size)]
    start = 0
    while start < n:
        # Sorted ascending: the batch's width is the width of its last sentence's longest side.
        width = np.maximum.accumulate(longest[order[start:start + max_tokens]])
        fits = width * np.arange(1, len(width) + 1) <= max_tokens
        size = max(1, int(np.argmin(fits)) if not fits.all() else len(width))
        batches.append(order[start:start + size].tolist())
        start += size
    return batches


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

    def _epoch_batches(self) -> list[list[int]]:
        order = (np.random.default_rng(self.seed + self.epoch).permutation(len(self.batches))
                 if self.shuffle else np.arange(len(self.batches)))
        per_rank = len(order) // self.num_replicas if self.num_replicas > 1 else len(order)
        mine = order[self.rank::self.num_replicas][:per_rank]
        return [self.batches[i] for i in mine]

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._epoch_batches()[self.start:]
        self.start = 0
        return iter(batches)

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
