"""Line-aligned parallel text files: plain or gzip-compressed (``.gz``), UTF-8.

Line i of the target file translates line i of the source file. Files are read whole and
decoded once (a 230k-line file takes a fraction of a second); only when decoding fails is the
offending line located, so that the error can name it.
"""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from utils.errors import DataError

BOM = "\ufeff"


def read_text(path: str | Path) -> str:
    """The whole content of a plain or ``.gz`` UTF-8 file, decoded, line endings untouched, a
    leading byte-order mark (U+FEFF, which some editors write) removed: it is not text, and kept
    it would become part of the first sentence.

    Raises ``DataError`` for a missing or unreadable file, and for bytes that are not UTF-8
    (naming the 1-based line and column of the first bad byte).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"cannot read {path}: {err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line_start = raw.rfind(b"\n", 0, err.start) + 1
        line = raw.count(b"\n", 0, err.start) + 1
        column = len(raw[line_start:err.start].decode("utf-8")) + 1  # in characters
        raise DataError(f"{path} line {line} is not valid UTF-8 "
                        f"(byte 0x{raw[err.start]:02x} at column {column})") from None
    return text.removeprefix(BOM)


def read_lines(path: str | Path) -> list[str]:
    """Lines of a plain or ``.gz`` UTF-8 text file, newline stripped ('\\n' and '\\r\\n'),
    nothing else stripped. A final newline does not start an extra empty line. Lines end at
    '\\n' only: a Unicode line or paragraph separator (U+2028, U+2029, U+0085, form feed), which
    ``str.splitlines`` would split on, stays inside its sentence and keeps the files aligned."""
    lines = read_text(path).split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_parallel_files(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    """(source lines, target lines) of two line-aligned files: line i of ``tgt_path``
    translates line i of ``src_path``. Different line counts raise ``DataError``."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(f"line counts differ: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)}")
    return src, tgt
