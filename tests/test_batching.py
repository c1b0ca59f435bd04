"""Token-budget batching, padding, and the tokenized-split cache."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from data.batching import (Collator, PairDataset, TokenBatchSampler, encode_split, load_or_encode,
                           make_batches)
from data.corpus import ParallelSplit


class WordTokenizer:
    """A tiny test double: one id per character-count bucket of each word (ids >= 4)."""

    pad_id, unk_id, bos_id, eos_id = 0, 1, 2, 3
    calls = 0

    def _encode(self, texts):
        WordTokenizer.calls += 1
        return [[4 + len(w) for w in t.split()] for t in texts]

    encode_src = encode_tgt = _encode

    def fingerprint(self) -> str:
        return "word-v1"


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
    a.set_epoch(0); e0 = list(a)
    a.set_epoch(1); e1 = list(a)
    b.set_epoch(1)
    assert list(b) == e1 and e0 != e1
    assert sorted(map(tuple, e0)) == sorted(map(tuple, e1))  # same batches, other order
    b.set_epoch(1); b.start_at(5)
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


def test_encode_split_drops_long_training_pairs_only_when_asked():
    split = ParallelSplit("train", ["a b", "a b c d e", "x"], ["a", "b", "a b c d e f"])
    kept = encode_split(split, WordTokenizer(), max_len=4)
    assert kept.index.tolist() == [0]
    assert kept.pair(0)[0].tolist() == [5, 5] and kept.pair(0)[1].tolist() == [5]
    whole = encode_split(split, WordTokenizer(), max_len=None)
    assert len(whole) == 3 and whole.tgt_lengths.tolist() == [1, 1, 6]
    assert PairDataset(whole)[2][2].tolist() == [5] * 6


def test_encoded_cache_hit_returns_identical_arrays(tmp_path):
    split = ParallelSplit("train", ["le chat noir", "un"], ["the black cat", "one"])
    tok = WordTokenizer()
    first = load_or_encode(split, tok, 10, tmp_path)
    calls = WordTokenizer.calls
    second = load_or_encode(split, tok, 10, tmp_path)
    assert WordTokenizer.calls == calls  # served from the cache
    for name in ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets", "index"):
        assert np.array_equal(getattr(first, name), getattr(second, name))
    changed = ParallelSplit("train", ["le chat noir", "deux"], ["the black cat", "two"])
    load_or_encode(changed, tok, 10, tmp_path)
    assert WordTokenizer.calls > calls  # different data: a miss
    assert not list(tmp_path.rglob("*.tmp"))


ARRAY_NAMES = ("src_tokens", "src_offsets", "tgt_tokens", "tgt_offsets", "index")


def _zero(path):
    path.write_bytes(bytes(path.stat().st_size))


def _truncate(path):
    path.write_bytes(path.read_bytes()[:-4])


def _foreign(path):  # another split's array of the same name and size, or a different file
    path.write_bytes(path.read_bytes()[::-1])


@pytest.mark.parametrize("array", ARRAY_NAMES)
@pytest.mark.parametrize("damage", [_zero, _truncate, _foreign], ids=["zeroed", "truncated", "foreign"])
def test_a_damaged_cache_entry_is_detected_and_rebuilt(tmp_path, caplog, array, damage):
    """Overwritten with zeros, cut short, or replaced: the load notices (size and CRC-32 recorded
    when the entry was written), says so in one line, and re-encodes the split from its source."""
    split = ParallelSplit("train", [f"le {'petit ' * (i % 4)}chat" for i in range(40)],
                          [f"the {'little ' * (i % 3)}cat" for i in range(40)])
    tok = WordTokenizer()
    load_or_encode(split, tok, 10, tmp_path)
    (folder,) = (tmp_path / "encoded").iterdir()
    damage(folder / f"{array}.bin")
    calls = WordTokenizer.calls
    with caplog.at_level("WARNING"):
        again = load_or_encode(split, tok, 10, tmp_path)
    assert WordTokenizer.calls > calls  # encoded again
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and f"cache {folder} is damaged ({array}.bin " in warnings[0]
    assert warnings[0].endswith("rebuilding it from its source")
    fresh = encode_split(split, tok, 10)
    for name in ARRAY_NAMES:
        assert np.array_equal(getattr(again, name), getattr(fresh, name)), name


def test_a_cache_without_its_record_or_of_an_older_version_is_rebuilt(tmp_path, caplog):
    split = ParallelSplit("train", ["le chat", "un chien noir"], ["the cat", "a black dog"])
    load_or_encode(split, WordTokenizer(), None, tmp_path)
    (folder,) = (tmp_path / "encoded").iterdir()
    meta = folder / "meta.json"
    for text in ('{"version": "2", "sizes": {}}', "", "{not json"):
        meta.write_text(text, encoding="utf-8")
        with caplog.at_level("WARNING"):
            again = load_or_encode(split, WordTokenizer(), None, tmp_path)
        assert "is damaged" in caplog.records[-1].getMessage()
        assert again.src_lengths.tolist() == [2, 3]


def test_an_unwritable_cache_folder_is_one_line(tmp_path):
    from utils.errors import DataError

    (tmp_path / "file").write_text("not a folder")
    split = ParallelSplit("train", ["le chat"], ["the cat"])
    with pytest.raises(DataError, match=r"^cannot write cache folder .*file/encoded: Not a directory; set "
                                        r"data.cache_dir to a folder you may write to$"):
        load_or_encode(split, WordTokenizer(), None, tmp_path / "file")


def test_the_cache_is_written_in_chunks_and_memory_mapped(tmp_path, monkeypatch):
    """Chunks of 3 sentences (so pairs dropped by max_len fall in several chunks): the cached,
    memory-mapped arrays equal the flat token lists written out here, and a second load reads
    them without tokenizing again."""
    import data.batching as batching

    monkeypatch.setattr(batching, "ENCODE_CHUNK", 3)
    src = ["a bb ccc", "dddd", "e " * 12, "ff gg", "h", "ii jj kk", "ll " * 11, "m n"]
    tgt = ["x", "yy zz", "w", "v " * 15, "u", "tt", "s", "r q"]
    split = ParallelSplit("train", src, tgt)
    WordTokenizer.calls = 0
    enc = load_or_encode(split, WordTokenizer(), 10, tmp_path)
    keep = [i for i in range(len(src)) if len(src[i].split()) <= 10 and len(tgt[i].split()) <= 10]
    assert keep == [0, 1, 4, 5, 7]
    assert enc.index.tolist() == keep
    expected_src = [4 + len(w) for i in keep for w in src[i].split()]
    assert enc.src_tokens.tolist() == expected_src
    assert enc.src_offsets.tolist() == np.cumsum([0] + [len(src[i].split()) for i in keep]).tolist()
    assert [enc.pair(j)[1].tolist() for j in range(len(keep))] == [[4 + len(w) for w in tgt[i].split()] for i in keep]
    assert isinstance(enc.src_tokens, np.memmap)
    calls = WordTokenizer.calls
    again = load_or_encode(split, WordTokenizer(), 10, tmp_path)
    assert WordTokenizer.calls == calls and again.src_tokens.tolist() == expected_src
    assert not [p for p in (tmp_path / "encoded").iterdir() if p.name.startswith(".")]  # no staging left


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


def test_a_chunk_whose_pairs_are_all_dropped_keeps_the_offsets_running(tmp_path, monkeypatch):
    import data.batching as batching

    monkeypatch.setattr(batching, "ENCODE_CHUNK", 2)
    src = ["a b", "c", "x " * 9, "y " * 9, "d e f"]
    tgt = ["g", "h i", "z", "z", "j"]
    enc = load_or_encode(ParallelSplit("train", src, tgt), WordTokenizer(), 5, tmp_path)
    assert enc.index.tolist() == [0, 1, 4]
    assert enc.src_offsets.tolist() == [0, 2, 3, 6] and enc.tgt_offsets.tolist() == [0, 1, 3, 4]


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
