"""The tokenized-split cache: chunked writing, memory-mapped reading, length filters, and damage
(zeroed, truncated, foreign arrays; missing or old records) detected and rebuilt."""
from __future__ import annotations

import numpy as np
import pytest

from data.batching import PairDataset
from data.corpus import ParallelSplit
from data.encoded import encode_split, load_or_encode
from tests.data.conftest import WordTokenizer


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
    import data.encoded as encoded

    monkeypatch.setattr(encoded, "ENCODE_CHUNK", 3)
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


def test_a_chunk_whose_pairs_are_all_dropped_keeps_the_offsets_running(tmp_path, monkeypatch):
    import data.encoded as encoded

    monkeypatch.setattr(encoded, "ENCODE_CHUNK", 2)
    src = ["a b", "c", "x " * 9, "y " * 9, "d e f"]
    tgt = ["g", "h i", "z", "z", "j"]
    enc = load_or_encode(ParallelSplit("train", src, tgt), WordTokenizer(), 5, tmp_path)
    assert enc.index.tolist() == [0, 1, 4]
    assert enc.src_offsets.tolist() == [0, 2, 3, 6] and enc.tgt_offsets.tolist() == [0, 1, 3, 4]
