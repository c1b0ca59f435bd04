"""utils.terminal: a bar only where a terminal with a width will show it."""
from __future__ import annotations

import io

from tests.terminal import pseudo_terminal
from utils.terminal import draws_in_place


def test_a_bar_is_drawn_on_a_sized_terminal_only():
    with pseudo_terminal(columns=80) as (wide, _):
        assert draws_in_place(wide)
    with pseudo_terminal(columns=0) as (unsized, _):  # tqdm would fit its bar into 0 columns: nothing shown
        assert not draws_in_place(unsized)
    assert not draws_in_place(io.StringIO())  # a log or a file
    with pseudo_terminal(columns=80) as (closed, _):
        closed.close()
        assert not draws_in_place(closed)  # closed meanwhile: no bar, no error
