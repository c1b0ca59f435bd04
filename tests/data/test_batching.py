"""Token-budget batching, padding, and a cached split reaching spawned loader workers."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from data.batching import Collator, PairDataset, TokenBatchSampler, make_batches
from data.corpus import ParallelSplit
from data.encoded import encode_split, load_or_encode
from tests.data.conftest import WordTokenizer


def random_lengths(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, 60, n), rng.integers(1, 70, n)


def test_batches_cover_every_sentence_once_within_budget():
    src, tgt = random_lengths()
    batches = make_batches(src, tgt, max_tokens=500, seed=1)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(src)))
    for b in batches:
        width = max(max(src[i], tgt[i]) + 1 for i in b)
        assert len(b) * width <= 500 or len(b) == 1


def test_batches_are_length_bucketed():
    src, tgt = random_lengths()
    batches = make_batches(src, tgt, max_tokens=1000, seed=1)
    padded = sum(len(b) * max(src[i] for i in b) for b in batches)
    # bucketing keeps padding small compared with random batches of the same sizes
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(src))
    sizes = [len(b) for b in batches]
    random_batches = np.split(perm, np.cumsum(sizes)[:-1])
    padded_random = sum(len(b) * max(src[i] for i in b) for b in random_batches)
    assert padded < 0.7 * padded_random
    assert padded <= 1.1 * src.sum()


def test_fixed_sentence_count_batches():
    src, tgt = random_lengths(103)
    batches = make_batches(src, tgt, max_tokens=10, batch_size=10, seed=0)
    assert [len(b) for b in batches] == [10] * 10 + [3]


def test_oversized_sentence_gets_its_own_batch():
    batches = make_batches(np.array([5, 500, 6]), np.array([5, 3, 6]), max_tokens=100)
    assert [1] in batches and sorted(i for b in batches for i in b) == [0, 1, 2]


def test_sampler_shuffles_per_epoch_deterministically_and_resumes():
    src, tgt = random_lengths(500)
    a = TokenBatchSampler(src, tgt, max_tokens=400, seed=3)
    b = TokenBatchSampler(src, tgt, max_tokens=400, seed=3)
    a.set_epoch(0)
    e0 = list(a)
    a.set_epoch(1)
    e1 = list(a)
    b.set_epoch(1)
    assert list(b) == e1 and e0 != e1
    assert sorted(map(tuple, e0)) == sorted(map(tuple, e1))  # same batches, other order
    b.set_epoch(1)
    b.start_at(5)
    assert list(b) == e1[5:]
    assert list(b) == e1  # start_at applies to one pass only


def test_sampler_shards_by_rank_without_overlap():
    src, tgt = random_lengths(500)
    r0 = TokenBatchSampler(src, tgt, 400, seed=2, num_replicas=2, rank=0)
    r1 = TokenBatchSampler(src, tgt, 400, seed=2, num_replicas=2, rank=1)
    b0, b1 = list(r0), list(r1)
    assert len(b0) == len(b1) == len(r0)
    assert not {i for b in b0 for i in b} & {i for b in b1 for i in b}


def test_collator_places_bos_eos_and_padding():
    collate = Collator(pad_id=0, bos_id=2, eos_id=3)
    batch = collate([(7, np.array([10, 11, 12]), np.array([20])), (9, np.array([13]), np.array([21, 22]))])
    assert batch.src.tolist() == [[10, 11, 12, 3], [13, 3, 0, 0]]
    assert batch.tgt_in.tolist() == [[2, 20, 0], [2, 21, 22]]
    assert batch.tgt_out.tolist() == [[20, 3, 0], [21, 22, 3]]
    assert batch.indices.tolist() == [7, 9]
    assert batch.src.dtype == torch.long


@pytest.mark.parametrize("chunk", [700, 1_000_000])
def test_length_order_is_lexsorts_order_and_lengths_are_int32(chunk, monkeypatch):
    """The lean counting sort gives exactly np.lexsort((tiebreak, tgt, src)), in one chunk or in
    several: batches of runs made before it are unchanged for the same seed."""
    import data.batching as batching

    monkeypatch.setattr(batching, "SORT_CHUNK", chunk)
    src, tgt = random_lengths(5000, seed=3)
    tiebreak = np.random.default_rng(9).permutation(len(src))
    assert np.array_equal(batching._length_order(src, tgt, tiebreak), np.lexsort((tiebreak, tgt, src)))
    split = encode_split(ParallelSplit("train", ["a b c", "d"], ["e", "f g"]), WordTokenizer(), None)
    assert split.src_lengths.dtype == np.int32 and split.src_lengths.tolist() == [3, 1]


def test_a_cached_split_reaches_spawned_loader_workers_as_its_folder(tmp_path):
    """DataLoader workers started with "spawn" (macOS's and Windows' default) receive the dataset
    pickled: a memory-mapped split must travel as its folder (a few bytes, whatever its size), not
    as a copy of its arrays per worker, and the worker's batches must be the in-process ones."""
    import pickle

    src = [" ".join("w" * ((i + j) % 7 + 1) for j in range(i % 9 + 1)) for i in range(3000)]
    tgt = [" ".join("v" * ((i * j) % 5 + 1) for j in range(i % 11 + 1)) for i in range(3000)]
    enc = load_or_encode(ParallelSplit("train", src, tgt), WordTokenizer(), None, tmp_path)
    assert enc.src_tokens.nbytes + enc.tgt_tokens.nbytes > 40_000
    blob = pickle.dumps(PairDataset(enc))
    assert len(blob) < 1_000
    again = pickle.loads(blob).split
    assert isinstance(again.tgt_tokens, np.memmap)
    assert [again.pair(i)[1].tolist() for i in (0, 1234, 2999)] == [[4 + len(w) for w in tgt[i].split()]
                                                                    for i in (0, 1234, 2999)]
    sampler = TokenBatchSampler(enc.src_lengths, enc.tgt_lengths, 400, shuffle=True, seed=3)

    def batches(**workers):
        loader = torch.utils.data.DataLoader(PairDataset(enc), batch_sampler=sampler, collate_fn=Collator(0, 2, 3),
                                             **workers)
        return [(b.indices.tolist(), b.src.tolist(), b.tgt_out.tolist()) for b in loader]

    assert batches(num_workers=1, multiprocessing_context="spawn") == batches(num_workers=0)


# --- static shapes (train.static_shapes): one padded shape per rounded length -------------------

LADDER = (8, 16, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024)


def rounded(width: int) -> int:
    """The ladder's next length at or above ``width`` (written here, not data.batching's helper)."""
    return next((length for length in LADDER if width <= length), -(-width // 256) * 256)


@pytest.mark.parametrize("max_tokens", [300, 1000])
def test_static_batches_cover_every_pair_once_and_take_one_shape_per_rounded_length(max_tokens):
    src, tgt = random_lengths(2000, seed=4)
    sampler = TokenBatchSampler(src, tgt, max_tokens=max_tokens, seed=1, static_shapes=True)
    widths = np.maximum(src, tgt) + 1
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(i for b in batches for i in b) == list(range(len(src)))  # each pair once per epoch
        per_length: dict[int, list[list[int]]] = {}
        for b in batches:
            lengths = {rounded(int(widths[i])) for i in b}
            assert len(lengths) == 1  # one rounded length per batch
            length = lengths.pop()
            assert len(b) <= max(1, max_tokens // length)
            per_length.setdefault(length, []).append(b)
        for length, group in per_length.items():
            rows = max(1, max_tokens // length)
            members = sum(len(b) for b in group)
            assert len(group) == -(-members // rows)  # full batches but the last of each length
            assert sorted(len(b) for b in group)[1:] == [rows] * (len(group) - 1)


def test_static_collator_pads_rows_and_columns_to_the_shape_of_the_rounded_length():
    collate = Collator(pad_id=0, bos_id=2, eos_id=3, static_tokens=40)
    batch = collate([(7, np.array([10, 11, 12]), np.array([20])), (9, np.array([13]), np.array([21, 22]))])
    # widest pair: 3 source tokens + eos = 4 -> length 8, 40 // 8 = 5 rows
    assert batch.src.shape == batch.tgt_in.shape == batch.tgt_out.shape == (5, 8)
    assert batch.src[:2].tolist() == [[10, 11, 12, 3, 0, 0, 0, 0], [13, 3, 0, 0, 0, 0, 0, 0]]
    assert batch.tgt_in[:2].tolist() == [[2, 20, 0, 0, 0, 0, 0, 0], [2, 21, 22, 0, 0, 0, 0, 0]]
    assert batch.tgt_out[:2].tolist() == [[20, 3, 0, 0, 0, 0, 0, 0], [21, 22, 3, 0, 0, 0, 0, 0]]
    # filler rows: a source of eos alone (no fully masked attention row), bos alone, no label
    assert batch.src[2:].tolist() == [[3] + [0] * 7] * 3
    assert batch.tgt_in[2:].tolist() == [[2] + [0] * 7] * 3
    assert batch.tgt_out[2:].eq(0).all()
    assert batch.indices.tolist() == [7, 9, -1, -1, -1]
    assert batch.ntokens == 2 + 3  # real labels only
