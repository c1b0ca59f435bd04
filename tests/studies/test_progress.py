"""A study's progress line (studies.progress) on runs whose metrics logs the test writes."""
from __future__ import annotations

import io
import json
from pathlib import Path

from studies.progress import RunProgress, StudyProgress
from tests.terminal import pseudo_terminal


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def log(run_dir: Path, points: list[tuple[int, float]]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps({"kind": "train", "step": s, "time": t, "loss": 1.0}) + "\n"
                                                   for s, t in points), encoding="utf-8")


def test_progress_reads_the_runs_logs_and_estimates_at_the_slowest_pace(tmp_path):
    """Three runs of 300 updates, two workers: run a at 150 (1 s an update), b at 100 (2 s an update),
    c not started. Left: 150 + 200 + 300 = 650 updates, 325 a worker (more than the longest run's 300),
    at the slowest pace 2 s: 650 s, ~11 min."""
    runs = [RunProgress(tmp_path / name, 300) for name in "abc"]
    log(runs[0].run_dir, [(50, 100.0), (100, 150.0), (150, 200.0)])
    log(runs[1].run_dir, [(50, 100.0), (100, 200.0)])
    clock, stream = Clock(), io.StringIO()
    progress = StudyProgress("s", runs, parallel=2, stream=stream, interval=60, clock=clock)
    clock.now = 30
    progress.update()
    assert stream.getvalue() == ""  # not a terminal: nothing before a run ends or the interval passes
    clock.now = 90
    progress.update()
    assert stream.getvalue() == ("[s] 0/3 runs done, 28% of the updates, 1.5 min elapsed, ~11 min left at the "
                                 "slowest run's pace\n")
    progress.finished(runs[0].run_dir)  # said at once
    last = stream.getvalue().splitlines()[-1]
    # left 200 + 300 = 500, 250 a worker < the longest 300: 300 updates x 2 s = 10 min
    assert last == "[s] 1/3 runs done, 44% of the updates, 1.5 min elapsed, ~10 min left at the slowest run's pace"


def test_before_any_pace_no_estimate_and_a_terminal_gets_one_redrawn_line(tmp_path):
    runs = [RunProgress(tmp_path / "a", 100), RunProgress(tmp_path / "b", 0)]  # b: no update budget known
    log(runs[0].run_dir, [(10, 5.0)])  # one point: no pace yet
    with pseudo_terminal(columns=120) as (terminal, received):
        progress = StudyProgress("demo", runs, stream=terminal, clock=Clock())
        progress.update()
        assert progress.figures() == "10% of the updates, 0.0 min elapsed"
        progress.finished(runs[1].run_dir)
        progress.close()
        drawn = received()
    assert "\r" in drawn and "| 1/2 runs, 10% of the updates" in drawn and "\n" not in drawn  # redrawn in place


def test_a_terminal_without_a_size_gets_the_plain_lines(tmp_path):
    """A pseudo-terminal of 0 columns would show nothing of a bar (tqdm fits it to the width)."""
    runs = [RunProgress(tmp_path / "a", 100), RunProgress(tmp_path / "b", 100)]
    with pseudo_terminal(columns=0) as (terminal, received):
        progress = StudyProgress("demo", runs, stream=terminal, clock=Clock())
        progress.finished(runs[0].run_dir)
        progress.close()
        drawn = received()
    assert drawn.replace("\r\n", "\n") == "[demo] 1/2 runs done, 50% of the updates, 0.0 min elapsed\n"


def test_the_closing_summary_shows_a_tables_head_and_names_its_file(tmp_path):
    from studies.driver import table_head

    rows = [f"| s{i} | {90 - i:.2f} |" for i in range(16)]
    text = "\n".join(["| scheme | BLEU |", "| --- | ---: |", *rows, "", "Caption of a thousand characters."]) + "\n"
    head = table_head(text, tmp_path / "comparison_test.md")
    assert head.splitlines() == ["| scheme | BLEU |", "| --- | ---: |", *rows[:5],
                                 f"… 11 more rows; the whole table and its caption: {tmp_path / 'comparison_test.md'}"]
    short = table_head("\n".join(["| a |", "| --- |", "| x |", "", "c"]), tmp_path / "t.md")
    assert short.splitlines()[-1] == f"(caption: {tmp_path / 't.md'})" and "| x |" in short


def test_a_log_caught_mid_write_keeps_the_last_reading(tmp_path):
    run = RunProgress(tmp_path / "a", 300)
    log(run.run_dir, [(50, 10.0), (100, 20.0)])
    run.read()
    assert (run.step, run.pace) == (100, 0.2)
    with (run.run_dir / "metrics.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"kind": "train", "step": 150, "ti')  # a point being appended
    run.read()
    assert (run.step, run.pace) == (100, 0.2)
