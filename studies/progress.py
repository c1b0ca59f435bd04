"""A study's progress while its runs train: runs done of the total, the share of their updates made
(read off each run's ``metrics.jsonl``, whose points carry step and time) and the time left at the
slowest run's pace, so that a study of minutes says where it stands from its first minute.

On a terminal it is one line redrawn in place (a tqdm bar on stderr); elsewhere (a CI log, a file)
a plain line when a run finishes and at most one more every ``interval`` seconds.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from experiment.run_dir import read_metrics_log
from utils.terminal import draws_in_place


@dataclass
class RunProgress:
    """One queued run: its folder, its update budget (0: unknown, counted by runs only) and what its
    metrics log said last."""

    run_dir: Path
    max_steps: int
    step: int = 0
    pace: float | None = None  # seconds per update between its first and last logged points
    done: bool = False

    def read(self) -> None:
        """What the run's metrics log says now; a log caught mid-write (a half line) or not readable leaves
        the last reading as it was: the progress line never stops the study."""
        try:
            points = [p for p in read_metrics_log(self.run_dir) if "step" in p and "time" in p] if not self.done else []
        except (OSError, ValueError):
            return
        if points:
            self.step = max(p["step"] for p in points)
            first, last = points[0], points[-1]
            if last["step"] > first["step"]:
                self.pace = (last["time"] - first["time"]) / (last["step"] - first["step"])

    @property
    def left(self) -> int:
        return 0 if self.done else max(self.max_steps - self.step, 0)


@dataclass
class StudyProgress:
    """Progress of ``runs`` trained ``parallel`` at a time, written to ``stream`` (default stderr)."""

    name: str
    runs: list[RunProgress]
    parallel: int = 1
    stream: TextIO | None = None
    interval: float = 60.0
    clock: object = time.monotonic
    started: float = field(default=0.0)
    _said: float = field(default=0.0)
    _bar: object = None

    def __post_init__(self) -> None:
        self.stream = self.stream or sys.stderr
        self.started = self._said = self.clock()
        if draws_in_place(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=len(self.runs), desc=f"[{self.name}]", unit="run", file=self.stream,
                             bar_format="{desc} |{bar:20}| {n_fmt}/{total_fmt} runs{postfix}", leave=False)

    def finished(self, run_dir: Path) -> None:
        """A run is done (trained and tested, or kept from earlier): say so at once."""
        for run in self.runs:
            if run.run_dir == run_dir:
                run.done, run.step = True, run.max_steps
        self.update(force=True)

    def update(self, force: bool = False) -> None:
        """Read the unfinished runs' logs and redraw (terminal), or print a line when ``force`` or
        ``interval`` seconds passed since the last (elsewhere)."""
        for run in self.runs:
            run.read()
        if self._bar is not None:
            self._bar.n = sum(run.done for run in self.runs)
            self._bar.set_postfix_str(self.figures(), refresh=True)
        elif force or self.clock() - self._said >= self.interval:
            print(f"[{self.name}] {self.line()}", file=self.stream, flush=True)
            self._said = self.clock()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def figures(self) -> str:
        """The share of updates made, the minutes elapsed and the estimate of minutes left."""
        budget = sum(run.max_steps for run in self.runs)
        made = sum(run.max_steps - run.left for run in self.runs)
        elapsed = (self.clock() - self.started) / 60
        parts = [f"{100 * made / budget:.0f}% of the updates"] if budget else []
        parts.append(f"{elapsed:.1f} min elapsed")
        left = self.minutes_left()
        if left is not None:
            parts.append(f"~{left:.0f} min left at the slowest run's pace")
        return ", ".join(parts)

    def line(self) -> str:
        return f"{sum(run.done for run in self.runs)}/{len(self.runs)} runs done, {self.figures()}"

    def minutes_left(self) -> float | None:
        """The updates left, shared by the ``parallel`` workers (but never less than the longest run's
        own: it trains on one worker), at the slowest pace any run has shown; None before a pace is known."""
        paces = [run.pace for run in self.runs if run.pace]
        if not paces:
            return None
        left = [run.left for run in self.runs if not run.done] or [0]
        return max(sum(left) / max(self.parallel, 1), max(left)) * max(paces) / 60
