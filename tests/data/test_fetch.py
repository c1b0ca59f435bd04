"""``nmt data fetch``: the corpus's files from a mirror the test serves (a local HTTP server, or a
file:// folder), each checked against the SHA-256 of its text before it is moved into place."""
from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import shutil
import subprocess
import sys
import threading

import pytest

from data import fetch as fetching
from tests.conftest import ROOT
from utils.errors import UserError


def gz(text: str, mtime: int) -> bytes:
    return gzip.compress(text.encode("utf-8"), mtime=mtime)


@pytest.fixture
def small_corpus(monkeypatch, tmp_path):
    """A two-file corpus registered as 'multi30k', its files in a mirror folder (gzipped at another
    time than the checksums were taken: the headers differ, the texts do not)."""
    texts = {"train.fr.gz": "un chat\nun chien\n", "train.en.gz": "a cat\na dog\n"}
    files = tuple(fetching.CorpusFile(name, hashlib.sha256(text.encode()).hexdigest(), 2, 1)
                  for name, text in texts.items())
    monkeypatch.setitem(fetching.CORPORA, "multi30k", ("http://unused.invalid/", files))
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, text in texts.items():
        (mirror / name).write_bytes(gz(text, mtime=123))
    return mirror


def test_files_come_from_a_mirror_checked_and_are_kept_when_already_there(small_corpus, tmp_path):
    into = tmp_path / "data"
    said = []
    paths = fetching.fetch("multi30k", into, small_corpus.as_uri(), report=said.append)
    assert [p.name for p in paths] == ["train.fr.gz", "train.en.gz"]
    assert gzip.decompress((into / "train.en.gz").read_bytes()) == b"a cat\na dog\n"
    assert all("fetched" in line and "checked" in line for line in said)
    (small_corpus / "train.fr.gz").unlink()  # a second run reads nothing it already holds
    said.clear()
    fetching.fetch("multi30k", into, small_corpus.as_uri(), report=said.append)
    assert said == ["  train.fr.gz: already there (checked)", "  train.en.gz: already there (checked)"]


def test_a_file_that_differs_is_refused_and_nothing_is_written_for_it(small_corpus, tmp_path):
    (small_corpus / "train.en.gz").write_bytes(gz("a cat\na bird\n", mtime=0))  # one word changed
    into = tmp_path / "data"
    with pytest.raises(UserError, match=r"train\.en\.gz: not the expected file \(text SHA-256 .*, 2 lines; "
                                        r"expected .*, 2 lines\); nothing written for it"):
        fetching.fetch("multi30k", into, small_corpus.as_uri(), report=lambda _: None)
    assert sorted(p.name for p in into.iterdir()) == ["train.fr.gz"]  # the checked file stays, no temporary left
    (small_corpus / "train.en.gz").write_bytes(b"<html>not found</html>")
    with pytest.raises(UserError, match=r"not the expected file \(not gzip;"):
        fetching.fetch("multi30k", into, small_corpus.as_uri(), report=lambda _: None)


def test_without_a_network_it_says_which_files_to_put_where(small_corpus, tmp_path):
    into = tmp_path / "data"
    with pytest.raises(UserError, match=r"^cannot fetch http://127\.0\.0\.1:9/train\.fr\.gz: .*; without a network, "
                                        r"put the 2 files train\.fr\.gz, train\.en\.gz \(multi30k/dataset, "
                                        r"data/task1/raw\) into .*data and run this again to check them$"):
        fetching.fetch("multi30k", into, "http://127.0.0.1:9", timeout=5, report=lambda _: None)
    assert not into.exists()
    shutil.copytree(small_corpus, into)  # put there by hand: checked without a network
    assert len(fetching.fetch("multi30k", into, "http://127.0.0.1:9", timeout=5, report=lambda _: None)) == 2
    (into / "train.en.gz").write_bytes(gz("a cat\n", mtime=0))  # a wrong file by hand: named, and kept as it was
    with pytest.raises(UserError, match=r"^\S*data/train\.en\.gz: not the expected file \(text SHA-256 .*, 1 lines; "
                                        r"expected .*, 2 lines\), and the official file cannot be fetched "
                                        r"\(http://127\.0\.0\.1:9/train\.en\.gz: .*\); replace it with "
                                        r"multi30k/dataset's data/task1/raw/train\.en\.gz$"):
        fetching.fetch("multi30k", into, "http://127.0.0.1:9", timeout=5, report=lambda _: None)
    assert gzip.decompress((into / "train.en.gz").read_bytes()) == b"a cat\n"


def test_a_wrong_file_in_place_is_replaced_by_the_checked_official_one(small_corpus, tmp_path):
    into = tmp_path / "data"
    into.mkdir()
    (into / "train.fr.gz").write_bytes(gz("un chat\n", mtime=0))
    said = []
    fetching.fetch("multi30k", into, small_corpus.as_uri(), report=said.append)
    assert said[0].startswith("  train.fr.gz: in place but not the expected file (text SHA-256 ")
    assert said[0].endswith("; fetching the official one")
    assert gzip.decompress((into / "train.fr.gz").read_bytes()) == b"un chat\nun chien\n"


def test_the_real_corpus_over_http_with_other_gzip_headers(multi30k_dir, tmp_path):
    """The twelve official files, re-gzipped (other header times) and served over HTTP by a local
    server: the command fetches and checks every one and prints the line to export."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for wanted in fetching.MULTI30K_FILES:
        text = gzip.decompress((multi30k_dir / wanted.name).read_bytes())
        (mirror / wanted.name).write_bytes(gzip.compress(text, mtime=1))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(mirror))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        into = tmp_path / "multi30k-fr-en"
        proc = subprocess.run([sys.executable, "-m", "nmt", "data", "fetch", "multi30k", "--into", str(into),
                               "--mirror", f"http://127.0.0.1:{server.server_address[1]}/"],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("checked") == 12 and f"export MULTI30K_DIR={into}" in proc.stdout
    for wanted in fetching.MULTI30K_FILES:
        assert gzip.decompress((into / wanted.name).read_bytes()) == gzip.decompress(
            (multi30k_dir / wanted.name).read_bytes())


def test_a_checksum_list_line_of_another_form_is_one_line_naming_it(tmp_path):
    from data.fetch import read_checksums

    path = tmp_path / "corpus.sha256"
    path.write_text("# comment\n" + "a" * 64 + "  12  3  train.fr.gz\n" + "b" * 64 + "  12  train.en.gz\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"corpus\.sha256:3: not 'SHA256 LINES SIZE_KB NAME'"):
        read_checksums(path)
    path.write_text("a" * 64 + "  12  3  train.fr.gz\n", encoding="utf-8")
    (only,) = read_checksums(path)
    assert (only.name, only.lines, only.size_kb) == ("train.fr.gz", 12, 3)
