"""Token-budget batching and padding over an ``EncodedSplit`` (``data.encoded``).

``TokenBatchSampler`` sorts sentences by length (ties broken by a seeded shuffle), cuts the sorted
order into batches whose padded size (sentences x longest side, bos/eos included) stays within
``max_tokens`` (or a fixed sentence count), then shuffles the batch order per epoch with
``seed + epoch``. Under data parallelism each rank takes every world_size-th batch of the same
list. ``Collator`` pads to (B, S) source and (B, T) target tensors.

Static shapes (``train.static_shapes``, for a step captured as a CUDA graph): each pair's width
(its longer side + 1) is rounded up to the next of ``STATIC_LENGTHS``, a batch holds pairs of one
such length L only, ``max_tokens // L`` rows of them, and the collator pads every batch of length
L to exactly (max_tokens // L, L) for source and target alike — the last batch of a length with
rows of padding (source ``eos``, target ``bos`` then padding, no label), which add nothing to the
loss. So a split's batches take one shape per length used (a dozen or so), not one per batch.
What changes against token batching: sentences are grouped by rounded length, not exact length,
so a batch mixes lengths within one step of the ladder and pads up to about a quarter more.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from data.encoded import EncodedSplit


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


# The padded lengths of static-shape batches: steps of about a quarter, then multiples of 256.
STATIC_LENGTHS = (8, 16, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024)


def static_length(width: int) -> int:
    """The padded length of a static-shape batch holding a pair of ``width`` (longer side + 1)."""
    for length in STATIC_LENGTHS:
        if width <= length:
            return length
    step = 256
    return -(-width // step) * step


def static_rows(length: int, max_tokens: int) -> int:
    """Rows of every static-shape batch of padded ``length`` under the token budget (at least 1)."""
    return max(1, max_tokens // length)


def make_static_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_tokens: int,
                        seed: int = 0) -> Batches:
    """Batches of one padded length each (``static_length`` of their pairs' widths), ``static_rows``
    pairs each (the last batch of a length may hold fewer: the collator pads its rows). Within a
    length, pairs keep ``make_batches``'s order (sorted by length, ties shuffled by ``seed``)."""
    n = len(src_lengths)
    rng = np.random.default_rng(seed)
    order = _length_order(src_lengths, tgt_lengths, rng.permutation(n))
    widths = np.maximum(src_lengths[order], tgt_lengths[order]).astype(np.int64) + 1
    padded = np.fromiter((static_length(int(w)) for w in np.unique(widths)), dtype=np.int64)
    bucket = padded[np.searchsorted(np.unique(widths), widths)] if n else widths
    order = order[np.argsort(bucket, kind="stable")]  # grouped by padded length, each group length-sorted
    bucket = np.sort(bucket, kind="stable")
    starts = []
    for length in np.unique(bucket):
        first, last = np.searchsorted(bucket, length, "left"), np.searchsorted(bucket, length, "right")
        starts.extend(range(int(first), int(last), static_rows(int(length), max_tokens)))
    return Batches(order, np.asarray(starts, dtype=np.int64))


class TokenBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Length-bucketed batches under a token budget, reshuffled each epoch, sharded by rank.

    The batch list is fixed by (lengths, max_tokens, batch_size, seed); each epoch visits it in
    the order ``permutation(seed + epoch)``. ``set_epoch`` selects the epoch and ``start_at``
    skips already-consumed batches (exact resume in the middle of an epoch).
    """

    def __init__(self, src_lengths: Sequence[int], tgt_lengths: Sequence[int], max_tokens: int,
                 batch_size: int = 0, shuffle: bool = True, seed: int = 0,
                 num_replicas: int = 1, rank: int = 0, static_shapes: bool = False):
        if static_shapes:
            self.batches = make_static_batches(np.asarray(src_lengths), np.asarray(tgt_lengths), max_tokens, seed)
        else:
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

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return Batch(*(t.to(device, non_blocking=non_blocking) for t in
                       (self.src, self.tgt_in, self.tgt_out, self.indices)), ntokens=self.ntokens)

    def pin_memory(self) -> Batch:
        """Page-locked copies (the DataLoader calls this with ``pin_memory=True``), so that
        ``to(cuda, non_blocking=True)`` overlaps the copy with computation."""
        return Batch(*(t.pin_memory() for t in (self.src, self.tgt_in, self.tgt_out, self.indices)),
                     ntokens=self.ntokens)


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int, prefix: int | None = None,
                  suffix: int | None = None, shape: tuple[int, int] | None = None) -> torch.Tensor:
    """(B, T) LongTensor of right-padded sequences, each optionally wrapped in prefix/suffix;
    with ``shape`` (rows, width), padded to that (rows past the sequences are all padding)."""
    start = int(prefix is not None)
    width = max((len(s) for s in seqs), default=0) + start + int(suffix is not None)
    rows = len(seqs)
    if shape is not None:
        if shape[0] < rows or shape[1] < width:
            raise ValueError(f"{rows} sequences of width {width} do not fit the shape {shape}")
        rows, width = shape
    out = np.full((rows, width), pad_id, dtype=np.int64)
    for i, s in enumerate(seqs):
        if prefix is not None:
            out[i, 0] = prefix
        out[i, start:start + len(s)] = s
        if suffix is not None:
            out[i, start + len(s)] = suffix
    return torch.from_numpy(out)


class Collator:
    """Turns a list of (index, src ids, tgt ids) items into a ``Batch``.

    With ``static_tokens`` (the token budget of static-shape batches) every batch is padded to
    (``static_rows``, ``static_length``) of its widest pair; the padding rows hold a source of
    ``eos`` alone (so no attention row is fully masked), a target input of ``bos`` alone, no
    label, and index -1.
    """

    def __init__(self, pad_id: int, bos_id: int, eos_id: int, static_tokens: int | None = None):
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.static_tokens = static_tokens

    def __call__(self, items: list[tuple[int, np.ndarray, np.ndarray]]) -> Batch:
        srcs = [s for _, s, _ in items]
        tgts = [t for _, _, t in items]
        indices = [i for i, _, _ in items]
        shape = None
        if self.static_tokens is not None:
            length = static_length(max((max(len(s), len(t)) + 1 for s, t in zip(srcs, tgts)), default=1))
            shape = (max(static_rows(length, self.static_tokens), len(items)), length)
            filler = shape[0] - len(items)
            srcs, indices = srcs + [[]] * filler, indices + [-1] * filler
        src = pad_sequences(srcs, self.pad_id, suffix=self.eos_id, shape=shape)
        tgt_in = pad_sequences(tgts, self.pad_id, prefix=self.bos_id, shape=shape)
        if shape is not None:
            tgt_in[len(tgts):, 0] = self.bos_id
        return Batch(
            src=src, tgt_in=tgt_in,
            tgt_out=pad_sequences(tgts, self.pad_id, suffix=self.eos_id, shape=shape),
            indices=torch.tensor(indices, dtype=torch.long),
            ntokens=sum(len(t) + 1 for t in tgts),  # each target and its eos
        )
