"""Giving freed heap memory back to the operating system."""
from __future__ import annotations

import ctypes
import ctypes.util


def release_free_heap() -> None:
    """Ask glibc's allocator to return the free parts of its heap (``malloc_trim(0)``).

    Native libraries that build large transient structures (SentencePiece's trainer) free them
    into the allocator's arenas, which keep the pages: the process's resident memory stays at
    its peak for the rest of the run. A no-op where the C library has no ``malloc_trim``.
    """
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is not None:
        trim(0)
