"""The study driver (make demo / make reproduce-*): train, test, archive, compare, draw, resume."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY
from utils.errors import UserError
from studies.driver import Study, archived_runs, finished as run_finished, run_dir_of, run_study, write_archive_tables


def make_study(tmp_path) -> Study:
    # One base config: each scheme's run is it with model.positional.name=<scheme> (no per-scheme files).
    base = tmp_path / "configs" / "base.yaml"
    base.parent.mkdir()
    base.write_text(TINY.format(root=ROOT, cache=tmp_path / "cache"), encoding="utf-8")
    return Study("tiny", base, ["sinusoidal", "alibi"], [1], tmp_path / "runs",
                 overrides=["train.max_steps=20", "train.eval_every=10"], attention_text="Je la vois.",
                 archive=tmp_path / "archive")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Study, str]:
    """A two-scheme study run once (20 updates per scheme) and what it printed."""
    import contextlib
    import io

    study = make_study(tmp_path_factory.mktemp("study"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_study(study)
    return study, printed.getvalue()


def test_study_trains_archives_compares_and_draws(finished):
    study, out = finished
    for scheme in ("sinusoidal", "alibi"):
        archived = study.archive / scheme
        assert {p.name for p in archived.iterdir()} == {"config.yaml", "manifest.json", "metrics.jsonl", "eval"}
        results = json.loads((archived / "eval" / "test" / "results.json").read_text(encoding="utf-8"))
        assert results["scheme"] == scheme and results["n_sentences"] == 30
        assert not (archived / "checkpoints").exists()  # only small files are archived
    for table in (study.out / "comparison_test.md", study.archive / "comparison_test.md"):
        rows = [line for line in table.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
        assert {row.split(" | ")[0].strip("| ") for row in rows[2:]} == {"sinusoidal", "alibi"}
    pictures = study.out / "pictures"
    assert any(pictures.glob("*curves*.png")) and any(pictures.glob("attention_*/*.png"))
    assert str(study.archive / "comparison_test.md") in out


def test_a_second_start_keeps_finished_runs(finished, capsys):
    study, _ = finished
    kept = [study.out / "sinusoidal" / "checkpoints" / "best.pt",
            study.out / "sinusoidal" / "eval" / "test" / "results.json"]
    mtimes = [p.stat().st_mtime_ns for p in kept]
    run_study(study)
    assert "finished earlier, kept" in capsys.readouterr().out
    assert [p.stat().st_mtime_ns for p in kept] == mtimes  # neither trained nor tested again


def test_archive_alone_regenerates_the_table(finished, tmp_path):
    study, _ = finished
    # A copy of the archive without the run directories or checkpoints: the archive is all there is.
    alone = Study("alone", study.base_config, study.schemes, study.seeds, tmp_path / "no-runs",
                  archive=tmp_path / "archive")
    shutil.copytree(study.archive, alone.archive)
    (alone.archive / "comparison_test.md").unlink()
    assert [d.name for d in archived_runs(alone)] == ["alibi", "sinusoidal"]
    assert write_archive_tables(alone) == [alone.archive / "comparison_test.md"]
    before = (study.archive / "comparison_test.md").read_text(encoding="utf-8")
    assert (alone.archive / "comparison_test.md").read_text(encoding="utf-8") == before


def test_empty_archive_is_a_clear_error(tmp_path):
    study = make_study(tmp_path)
    with pytest.raises(UserError, match="no archived runs under"):
        write_archive_tables(study)


def test_a_run_left_with_another_config_is_refused_not_continued(finished, tmp_path):
    study, _ = finished
    changed = Study(study.name, study.base_config, ["alibi"], study.seeds, study.out,
                    overrides=["train.max_steps=25", "train.eval_every=10"], archive=tmp_path / "archive")
    with pytest.raises(UserError, match=r"alibi was trained with another config .* move or delete"):
        run_study(changed)
    assert not (tmp_path / "archive").exists()


def test_changed_decoding_re_evaluates_without_retraining_and_tables_never_mix_decodings(finished, tmp_path):
    study, _ = finished
    out = tmp_path / "runs"
    shutil.copytree(study.out / "alibi", out / "alibi")
    best = out / "alibi" / "checkpoints" / "best.pt"
    trained = best.stat().st_mtime_ns
    results = out / "alibi" / "eval" / "test" / "results.json"
    assert json.loads(results.read_text(encoding="utf-8"))["decode"]["stopping"] == "exact"  # the default
    first_k = Study(study.name, study.base_config, ["alibi"], study.seeds, out,
                    overrides=[*study.overrides, "decode.stopping=first_k"], archive=tmp_path / "archive")
    run_study(first_k)
    assert best.stat().st_mtime_ns == trained  # the recipe is unchanged: not trained again
    assert json.loads(results.read_text(encoding="utf-8"))["decode"]["stopping"] == "first_k"  # re-evaluated
    shutil.copytree(study.archive / "sinusoidal", first_k.archive / "sinusoidal")  # decoded with "exact"
    with pytest.raises(UserError, match=r'decoded differently on .test.*"stopping": "exact"'):
        write_archive_tables(first_k)


def test_command_line_overrides_are_not_archived(monkeypatch, capsys):
    import studies.__main__ as cli
    from studies.driver import STUDIES

    started = []
    monkeypatch.setattr(cli, "run_study", lambda study, device="cpu", parallel=1: started.append(study))
    cli.main(["multi30k", "--out", "runs/variant", "train.max_steps=5"])
    cli.main(["multi30k", "--schemes", "rope"])
    variant, plain = started
    assert variant.archive is None and variant.overrides == ["train.max_steps=5"]
    assert "not archived" in capsys.readouterr().out
    # The study's own settings are untouched by a variant started earlier in the same process.
    assert plain.archive == STUDIES["multi30k"].archive is not None
    assert plain.overrides == [] and plain.schemes == ["rope"]


def test_run_names_depend_on_the_seed_alone(tmp_path):
    one = make_study(tmp_path)
    three = Study(one.name, one.base_config, one.schemes, [1, 2, 3], one.out)
    assert run_dir_of(one, "rope", 1).name == run_dir_of(three, "rope", 1).name == "rope"
    assert [run_dir_of(three, "rope", s).name for s in three.seeds] == ["rope", "rope-seed2", "rope-seed3"]


def test_parallel_runs_keep_separate_logs_and_train_as_the_serial_ones(finished, tmp_path):
    study, _ = finished
    parallel = Study(study.name, study.base_config, study.schemes, study.seeds, tmp_path / "runs",
                     overrides=study.overrides, attention_text=study.attention_text, archive=tmp_path / "archive")
    run_study(parallel, parallel=2)
    for scheme, other in (("sinusoidal", "alibi"), ("alibi", "sinusoidal")):
        log = (parallel.out / "logs" / f"{scheme}.log").read_text(encoding="utf-8")
        assert str(parallel.out / scheme) in log and str(parallel.out / other) not in log
        curve = lambda run: [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
                             if json.loads(line)["kind"] == "train"]
        # same config and seed: the same loss curve whichever process arrangement trained it
        assert curve(parallel.out / scheme) == pytest.approx(curve(study.out / scheme), rel=1e-5)
        assert (parallel.archive / scheme / "eval" / "test" / "results.json").is_file()


def test_a_run_stopped_by_a_signal_is_not_kept_as_finished(finished, tmp_path):
    study, _ = finished
    run_dir = study.out / "sinusoidal"
    assert run_finished(run_dir)
    copy = tmp_path / "stopped"
    shutil.copytree(run_dir, copy)
    manifest = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    manifest["stopped_by"] = "SIGTERM"  # what train.py writes when a signal ends training early
    (copy / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert not run_finished(copy)


def test_a_failed_parallel_run_is_named_with_its_log_and_the_others_finish(finished, tmp_path):
    study, _ = finished
    broken = Study(study.name, study.base_config, ["sinusoidal", "alibi"], study.seeds, tmp_path / "runs",
                   overrides=study.overrides, archive=None)
    (broken.out / "alibi").mkdir(parents=True)
    (broken.out / "alibi" / "config.yaml").write_text("model: [not, a, mapping]\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"1 of 2 runs failed: .*alibi failed .*see .*logs/alibi\.log"):
        run_study(broken, parallel=2)
    assert run_finished(broken.out / "sinusoidal")


def test_an_interrupted_run_is_neither_tested_nor_archived(tmp_path, monkeypatch):
    import studies.driver as driver
    from training.loop import TrainResult

    study = make_study(tmp_path)
    monkeypatch.setattr(driver, "train", lambda cfg, run_dir, **kw: TrainResult(run_dir, 7, None, "SIGTERM"))
    with pytest.raises(UserError, match=r"sinusoidal: training stopped by SIGTERM at update 7; start the study again"):
        run_study(study)
    assert not (study.out / "sinusoidal" / "eval").exists() and not study.archive.exists()


STOPPED_STUDY = """
import sys
from pathlib import Path
from studies.driver import Study, run_study
from utils.cli import run_main
study = Study("tiny", Path(sys.argv[1]), ["sinusoidal", "alibi", "rope"], [1], Path(sys.argv[2]),
              overrides=["train.max_steps=100000", "train.eval_every=100000"], attention_text="Je la vois.")
run_main(lambda: run_study(study, parallel=2))
"""


def _children(pid: int) -> list[int]:
    return [int(p) for p in (Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]


@pytest.mark.parametrize("signum, to_group", [(signal.SIGTERM, False), (signal.SIGINT, True)],
                         ids=["kill-SIGTERM", "terminal-Ctrl-C"])
def test_a_signalled_parallel_study_stops_its_workers_and_leaves_resumable_runs(tmp_path, signum, to_group):
    """`kill` signals the study alone: before, it died and its workers trained on, orphaned. A
    terminal's Ctrl-C signals the study's process group: each worker must get it once (a second
    signal stops a training at once, without its checkpoint)."""
    study = make_study(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", STOPPED_STUDY, str(study.base_config), str(study.out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    workers: list[int] = []
    try:
        logs = [study.out / "logs" / f"{scheme}.log" for scheme in ("sinusoidal", "alibi")]
        deadline = time.monotonic() + 120
        while not all(log.is_file() and "Engine run starting" in log.read_text() for log in logs):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        workers = [pid for pid in _children(proc.pid) if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert len(workers) == 2
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signum
        assert err.strip().splitlines()[-1] == (
            f"error: stopped by {signal.Signals(signum).name}: 0 of 3 runs finished, 2 stopped or failed (see their "
            "logs; a stopped run saved its last.pt), 1 not started; start the study again to continue")
        time.sleep(1)
        assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]  # no worker trains on
        for scheme in ("sinusoidal", "alibi"):  # each stopped after an update and can be resumed
            manifest = json.loads((study.out / scheme / "manifest.json").read_text(encoding="utf-8"))
            assert manifest["stopped_by"] == signal.Signals(signum).name
            assert (study.out / scheme / "checkpoints" / "last.pt").is_file() and not run_finished(study.out / scheme)
        assert not (study.out / "rope").exists()  # never started
    finally:
        for pid in [proc.pid, *workers]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
