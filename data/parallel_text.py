"""Line-aligned parallel text files, plain or gzip-compressed, UTF-8."""
from __future__ import annotations

import gzip
from pathlib import Path

from utils.errors import DataError


def read_lines(path: str | Path) -> list[str]:
    """Lines of a plain or .gz UTF-8 file, newline ('\\n' or '\\r\\n') stripped, nothing else."""
    path = Path(path)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    except (OSError, EOFError) as err:
        raise DataError(f"cannot read {path}: {err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(f"{path} line {line} is not valid UTF-8 "
                        f"(byte 0x{raw[err.start]:02x} at column {column})") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_parallel_files(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    """(source lines, target lines); line i of the target translates line i of the source."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(f"line counts differ: {src_path} has {len(src)} lines, {tgt_path} has {len(tgt)}")
    return src, tgt
