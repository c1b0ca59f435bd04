"""What an archive cost (scoring.cost): hours per device from manifests, measured or bounded."""
from __future__ import annotations

import json

import pytest

from scoring.cost import cost_table, run_cost
from utils.errors import UserError


def manifest(tmp_path, name: str, **fields):
    run = tmp_path / name
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(fields), encoding="utf-8")
    return run


def test_measured_time_counted_by_threads_and_old_manifests_from_their_timestamps(tmp_path):
    cpu = "Intel(R) Xeon(R) Processor"
    runs = [
        # measured: 1.5 h on 2 threads -> 3 core-hours
        manifest(tmp_path, "a", device="cpu (x86_64, 2 threads)", cpu=cpu, threads=2, started="2026-11-25T00:00:00+00:00",
                 train_seconds=5400.0),
        # old manifest, trained in one go: 10:00 -> 10:45 = 0.75 h, threads read from the device text
        manifest(tmp_path, "b", device="cpu (x86_64, 1 threads)", cpu=cpu, started="2026-11-24T10:00:00+00:00",
                 last_started="2026-11-24T10:00:00+00:00", last_finished="2026-11-24T10:45:00+00:00"),
        # old manifest, resumed: 08:00 -> 10:00 spans the pause: 2 h, an upper bound
        manifest(tmp_path, "c", device="cpu (x86_64, 1 threads)", cpu=cpu, started="2026-11-24T08:00:00+00:00",
                 last_started="2026-11-24T09:30:00+00:00", last_finished="2026-11-24T10:00:00+00:00"),
        # a GPU run: 0.5 h, process-hours (threads do not multiply)
        manifest(tmp_path, "d", device="NVIDIA H100 80GB HBM3", cpu=cpu, threads=1, started="2026-11-25T00:00:00+00:00",
                 train_seconds=1800.0),
    ]
    assert run_cost(runs[1]).seconds == 2700.0 and run_cost(runs[1]).exact and run_cost(runs[1]).threads == 1
    assert not run_cost(runs[2]).exact and run_cost(runs[2]).seconds == 7200.0
    table = cost_table(runs)
    # CPU: 1.5 + 0.75 + 2 = 4.25 h; core-hours 3 + 0.75 + 2 = 5.75; one upper bound
    assert f"| CPU: {cpu} | 3 | 4.2 | 5.8 | 1 |" in table
    assert "| NVIDIA H100 80GB HBM3 | 1 | 0.5 | 0.5 | 0 |" in table
    assert "| all | 4 | 4.8 | | 1 |" in table  # core-hours and GPU process-hours are not summed
    # CPU runs only (two CPU models): the total's core-hours are summed, 5.75 + 1 x 0.5 h on one thread
    other = manifest(tmp_path, "e", device="cpu (x86_64, 1 threads)", cpu="AMD EPYC", threads=1,
                     started="2026-11-25T00:00:00+00:00", train_seconds=1800.0)
    assert "| all | 4 | 4.8 | 6.2 | 1 |" in cost_table([*runs[:3], other])


def test_a_manifest_that_cannot_tell_is_a_one_line_error(tmp_path):
    with pytest.raises(UserError, match=r"x: its manifest names no device or start time"):
        run_cost(manifest(tmp_path, "x", seed=1))
    with pytest.raises(UserError, match=r"y: its manifest says the run has not finished"):
        run_cost(manifest(tmp_path, "y", device="cpu (x86_64, 1 threads)", started="2026-11-24T08:00:00+00:00"))
