"""Whether a progress bar can be shown: one test for every command that draws one (a study's
progress, training's bar, the decoding bar of ``nmt test``)."""
from __future__ import annotations

import os
import sys
from typing import TextIO


def draws_in_place(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default stderr) is a terminal with a width to redraw a line in. A
    pseudo-terminal opened without a size (0 columns, as some job runners do) shows nothing of a bar,
    and a log or a file gets plain lines instead."""
    stream = stream or sys.stderr
    try:
        return stream.isatty() and os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, OSError, ValueError):
        return False
