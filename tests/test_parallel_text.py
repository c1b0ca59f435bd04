"""Line-aligned text files: plain, gzip, CRLF, and the errors for bad input."""
from __future__ import annotations

import gzip

import pytest

from data.parallel_text import read_lines, read_parallel_files
from utils.errors import DataError


def test_plain_gzip_and_crlf(tmp_path):
    (tmp_path / "a.fr").write_bytes("un\r\ndeux  \r\n\r\ntrois".encode())
    with gzip.open(tmp_path / "a.en.gz", "wb") as f:
        f.write("one\ntwo  \n\nthree\n".encode())
    assert read_lines(tmp_path / "a.fr") == ["un", "deux  ", "", "trois"]
    src, tgt = read_parallel_files(tmp_path / "a.fr", tmp_path / "a.en.gz")
    assert tgt == ["one", "two  ", "", "three"] and len(src) == 4


def test_line_count_mismatch_names_both_files(tmp_path):
    (tmp_path / "x.fr").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "x.en").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_parallel_files(tmp_path / "x.fr", tmp_path / "x.en")
    assert "x.fr has 3" in str(err.value) and "x.en has 2" in str(err.value)


def test_bad_utf8_names_file_and_line(tmp_path):
    (tmp_path / "bad.fr").write_bytes("bonjour\nça va\n".encode() + b"caf\xe9\n")
    with pytest.raises(DataError, match=r"bad\.fr line 3 is not valid UTF-8 \(byte 0xe9 at column 4\)"):
        read_lines(tmp_path / "bad.fr")


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="not found"):
        read_lines(tmp_path / "nope.fr")


def test_multi30k_files(multi30k_dir):
    src, tgt = read_parallel_files(multi30k_dir / "train.fr.gz", multi30k_dir / "train.en.gz")
    assert len(src) == len(tgt) == 29000
    val_src, _ = read_parallel_files(multi30k_dir / "val.fr.gz", multi30k_dir / "val.en.gz")
    assert len(val_src) == 1014
    assert any(ch in line for line in src[:200] for ch in "éèàç")
