"""Content hashes of sentence collections that may be larger than memory."""
from __future__ import annotations

from collections.abc import Sequence

HASH_CHUNK = 100_000  # sentences joined and hashed at once


def hash_sides(h, *sides: Sequence[str]) -> None:
    """Feed each side into the hash ``h`` as its sentences joined by newlines, then a NUL byte —
    chunk by chunk, so a corpus larger than memory is never joined whole (same bytes, same hash
    as joining it)."""
    for side in sides:
        for start in range(0, len(side), HASH_CHUNK):
            if start:
                h.update(b"\n")
            h.update("\n".join(side[start:start + HASH_CHUNK]).encode("utf-8"))
        h.update(b"\x00")
