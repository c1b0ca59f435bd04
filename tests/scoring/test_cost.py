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
    table, _ = cost_table(runs)
    # CPU: 1.5 + 0.75 + 2 = 4.25 h; core-hours 3 + 0.75 + 2 = 5.75; one upper bound
    assert f"| CPU: {cpu} | 3 | 4.2 | 5.8 | 1 |" in table
    assert "| NVIDIA H100 80GB HBM3 | 1 | 0.5 | 0.5 | 0 |" in table
    assert "| all | 4 | 4.8 | — | 1 |" in table  # core-hours and GPU process-hours are not summed
    # CPU runs only (two CPU models): the total's core-hours are summed, 5.75 + 1 x 0.5 h on one thread
    other = manifest(tmp_path, "e", device="cpu (x86_64, 1 threads)", cpu="AMD EPYC", threads=1,
                     started="2026-11-25T00:00:00+00:00", train_seconds=1800.0)
    assert "| all | 4 | 4.8 | 6.2 | 1 |" in cost_table([*runs[:3], other])[0]


def test_a_manifest_that_cannot_tell_is_a_one_line_error(tmp_path):
    with pytest.raises(UserError, match=r"x: its manifest names no device or start time"):
        run_cost(manifest(tmp_path, "x", seed=1))
    with pytest.raises(UserError, match=r"y: its manifest says the run has not finished"):
        run_cost(manifest(tmp_path, "y", device="cpu (x86_64, 1 threads)", started="2026-11-24T08:00:00+00:00"))


def test_per_scheme_cost_is_a_ratio_only_within_runs_that_shared_a_machine_alike(tmp_path):
    """Seconds per 1,000 updates, × sinusoidal within each way of sharing the machine (device,
    threads, runs at once), decoding speed and peak memory from the records; unrecorded sharing
    leaves a run out, and with none recorded the section says why."""
    import yaml

    from experiment.config import load_config, to_dict
    from scoring.cost import scheme_cost_lines, scheme_costs
    from scoring.table_rows import SchemeCost, cost_from_csv
    from tests.conftest import evaluation_record

    def run(name, scheme, sharing, seconds, steps=800, speed=None, peak=None, cpu="AMD EPYC"):
        folder = manifest(tmp_path, name, device="cpu (x86_64, 1 threads)", cpu=cpu, threads=1,
                          started="2026-11-27T00:00:00+00:00", train_seconds=seconds, steps=steps,
                          runs_sharing_machine=sharing)
        tree = to_dict(load_config(None))
        tree["model"]["positional"]["name"] = scheme
        (folder / "config.yaml").write_text(yaml.safe_dump(tree), encoding="utf-8")
        if speed is not None:
            (folder / "eval" / "test").mkdir(parents=True)
            (folder / "eval" / "test" / "results.json").write_text(json.dumps(
                evaluation_record(sentences_per_second=speed, decoding_peak_mib=peak)), encoding="utf-8")
        return folder

    runs = [run("s1", "sinusoidal", 2, 400.0, speed=30.0, peak=900.0), run("s2", "sinusoidal", 2, 480.0, speed=34.0),
            run("r1", "rope", 2, 528.0, speed=20.0, peak=950.0),  # 660 s / 1,000 updates over sinusoidal's 550
            run("r2", "rope", 1, 300.0), run("a1", "alibi", None, 100.0)]
    text = scheme_costs(scheme_cost_lines(runs, "test"))
    assert "Per scheme, runs on CPU AMD EPYC, 1 thread(s), 2 run(s) at once:" in text
    assert "| sinusoidal | 2 | 550.0 | 1.00 | 32.0 | 900 |" in text
    assert f"| rope | 1 | 660.0 | {660 / 550:.2f} | 20.0 | 950 |" in text
    # alone on the machine, rope has no sinusoidal to be a ratio of; alibi recorded no sharing: left out
    assert "Per scheme, runs on CPU AMD EPYC, 1 thread(s), 1 run(s) at once:" in text and "| rope | 1 | 375.0 | — |" in text
    assert "alibi" not in text
    assert scheme_costs(scheme_cost_lines(runs[-1:], "test")).startswith("Per scheme: not shown — no run's manifest records")
    # the CSV holds the same lines, the way of sharing a column of its own; the Markdown holds them too
    markdown, table_csv = cost_table(runs, "test")
    alone, shared = "CPU AMD EPYC, 1 thread(s), 1 run(s) at once", "CPU AMD EPYC, 1 thread(s), 2 run(s) at once"
    devices, schemes = cost_from_csv(table_csv)
    assert devices[-1].runs == 5 and text in markdown
    assert schemes == [SchemeCost(alone, "rope", 1, 375.0, None, None, None),
                       SchemeCost(shared, "sinusoidal", 2, 550.0, 1.0, 32.0, 900.0),
                       SchemeCost(shared, "rope", 1, 660.0, round(660 / 550, 2), 20.0, 950.0)]
