"""Small file helpers: the one atomic writer every module uses.

A file is written to a temporary name in its own folder, flushed to disk, then renamed over the
target, so a crash or a full disk never leaves a half-written file under the real name (the
previous version, if any, stays). Files get the usual permissions (0666 minus the umask), not the
0600 of a temporary file.
"""
from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from utils.errors import resource_error


def umask_bits() -> int:
    """The process umask (read without changing it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, write: Callable[[BinaryIO], Any], what: str = "file") -> Path:
    """Call ``write(binary_file)`` on a temporary file beside ``path``, then rename it into place.

    An unwritable folder or a full disk raises ``ResourceError`` naming ``path`` (``what`` says what it
    is: "file", "checkpoint", ...); the temporary file is removed whatever happens.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise resource_error(f"{what} {path}", err) from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~umask_bits())
        os.replace(tmp, path)
    except OSError as err:
        _unlink(tmp)
        raise resource_error(f"{what} {path}", err) from None
    except BaseException:
        _unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """``atomic_write`` of UTF-8 text."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """``atomic_write`` of ``torch.save(obj)``. torch.save reports a failed write (disk full,
    file too large) as a ``RuntimeError`` from its zip writer; it is one line here too."""
    import torch

    def save(f: BinaryIO) -> None:
        try:
            torch.save(obj, f)
        except RuntimeError as err:
            reason = (str(err).strip().splitlines() or ["write failed"])[0]
            raise OSError(errno.EFBIG if "too large" in reason.lower() else errno.ENOSPC,
                          f"the write failed ({reason[:120]}); disk full or file too large?") from None

    return atomic_write(path, save, what="checkpoint")


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def stored_version(tree: dict, current: int, what: str) -> tuple[dict, int]:
    """A copy of a stored ``tree`` and its format version (1 where it states none), for a migration
    to ``current``; a version newer than ``current`` is a ValueError naming ``what``."""
    tree = dict(tree)
    version = tree.get("version", 1)
    if version > current:
        raise ValueError(f"{what} version {version} is newer than this code's ({current})")
    return tree, version
