"""A pseudo-terminal of a chosen width, for the tests of what commands draw on a terminal."""
from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import termios
from collections.abc import Callable, Iterator
from typing import TextIO


@contextlib.contextmanager
def pseudo_terminal(columns: int) -> Iterator[tuple[TextIO, Callable[[], str]]]:
    """A pseudo-terminal ``columns`` wide (0: opened without a size, as some job runners do): the
    stream to write to, and a function that returns what reached the other end so far."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    stream = open(follower, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 (closed below)

    def received() -> str:
        stream.flush()
        chunks = []
        while select.select([leader], [], [], 0.2)[0]:
            chunks.append(os.read(leader, 65536))
        return b"".join(chunks).decode("utf-8")
    try:
        yield stream, received
    finally:
        stream.close()
        os.close(leader)
        os.close(follower)
