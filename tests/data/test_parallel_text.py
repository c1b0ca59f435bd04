"""Line-aligned text files: plain, gzip, CRLF, speed, and the errors for bad input."""
from __future__ import annotations

import gzip
import time

import pytest

from data.parallel_text import read_lines, read_parallel_files
from utils.errors import DataError


def test_plain_and_gzip_round_trip(tmp_path):
    lines = ["Un homme en vélo.", "  deux espaces  ", "", "tab\tinside", "dernière"]
    (tmp_path / "a.fr").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with gzip.open(tmp_path / "a.en.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    assert read_lines(tmp_path / "a.fr") == lines
    assert read_parallel_files(tmp_path / "a.fr", tmp_path / "a.en.gz") == (lines, lines)


def test_crlf_and_missing_final_newline(tmp_path):
    (tmp_path / "crlf.fr").write_bytes(b"un\r\ndeux  \r\n\r\ntrois")
    assert read_lines(tmp_path / "crlf.fr") == ["un", "deux  ", "", "trois"]
    (tmp_path / "empty.fr").write_bytes(b"")
    assert read_lines(tmp_path / "empty.fr") == []
    (tmp_path / "blank.fr").write_bytes(b"\n")
    assert read_lines(tmp_path / "blank.fr") == [""]


def test_a_byte_order_mark_is_dropped_and_only_newlines_end_lines(tmp_path):
    text = "\ufeffUn\u2028deux\r\ntrois\u2029quatre\x85cinq\x0csix\nsept\ufeff\n"
    (tmp_path / "a.fr").write_bytes(text.encode("utf-8"))
    with gzip.open(tmp_path / "a.fr.gz", "wb") as f:
        f.write(text.encode("utf-8"))
    expected = ["Un\u2028deux", "trois\u2029quatre\x85cinq\x0csix", "sept\ufeff"]  # a BOM inside is text
    assert read_lines(tmp_path / "a.fr") == read_lines(tmp_path / "a.fr.gz") == expected
    (tmp_path / "b.en").write_text("One\ntwo\n", encoding="utf-8")
    with pytest.raises(DataError, match="line counts differ: .*a.fr has 3 lines, .*b.en has 2$"):
        read_parallel_files(tmp_path / "a.fr", tmp_path / "b.en")


def test_line_count_mismatch_names_both_files_and_counts(tmp_path):
    (tmp_path / "x.fr").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "x.en").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_parallel_files(tmp_path / "x.fr", tmp_path / "x.en")
    message = str(err.value)
    assert f"{tmp_path / 'x.fr'} has 3" in message and f"{tmp_path / 'x.en'} has 2" in message
    assert "\n" not in message


def test_bad_utf8_names_file_line_and_column(tmp_path):
    (tmp_path / "bad.fr").write_bytes("bonjour\nça va\n".encode() + b"un caf\xe9\nfin\n")
    with pytest.raises(DataError, match=r"bad\.fr line 3 is not valid UTF-8 \(byte 0xe9 at column 7\)"):
        read_lines(tmp_path / "bad.fr")
    # the column counts characters (7 here), not bytes (8); gzip content is checked the same way
    with gzip.open(tmp_path / "bad.en.gz", "wb") as f:
        f.write(b"ok\n\xc3\xa7a caf\xe9\n")
    with pytest.raises(DataError, match=r"bad\.en\.gz line 2 is not valid UTF-8 \(byte 0xe9 at column 7\)"):
        read_lines(tmp_path / "bad.en.gz")


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(DataError, match=r"file not found: .*nope\.fr$"):
        read_lines(tmp_path / "nope.fr")
    (tmp_path / "x.en").write_text("a\n", encoding="utf-8")
    with pytest.raises(DataError, match="nope.fr"):
        read_parallel_files(tmp_path / "nope.fr", tmp_path / "x.en")
    (tmp_path / "broken.fr.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match=r"cannot read .*broken\.fr\.gz"):
        read_lines(tmp_path / "broken.fr.gz")


def test_iwslt_sized_files_read_fast(tmp_path):
    n = 232_825
    text = "".join(f"Phrase numéro {i}, avec des accents : é à ç ô.\r\n" for i in range(n))
    with gzip.open(tmp_path / "train.fr.gz", "wt", encoding="utf-8", compresslevel=1) as f:
        f.write(text)
    start = time.perf_counter()
    lines = read_lines(tmp_path / "train.fr.gz")
    elapsed = time.perf_counter() - start
    assert len(lines) == n and lines[-1] == f"Phrase numéro {n - 1}, avec des accents : é à ç ô."
    assert elapsed < 3.0, f"reading {n} lines took {elapsed:.2f}s"


def test_multi30k_files(multi30k_dir):
    """Real Multi30k fr-en (skipped unless MULTI30K_DIR names its folder)."""
    src, tgt = read_parallel_files(multi30k_dir / "train.fr.gz", multi30k_dir / "train.en.gz")
    assert len(src) == len(tgt) == 29000
    val_src, val_tgt = read_parallel_files(multi30k_dir / "val.fr.gz", multi30k_dir / "val.en.gz")
    assert len(val_src) == len(val_tgt) == 1014
    assert any(ch in line for line in src for ch in "éèàçêô")
    assert all(line.strip() for line in src[:100] + tgt[:100])
