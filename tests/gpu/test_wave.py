"""The GPU command's CPU side: which runs the queue trains, the preflight's refusals, a wave packing
its finished runs as they come and none half-done when SIGTERM or the deadline stops it, and a pack
brought home making the tables a full archive makes, to the byte."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest
import yaml

from experiment.decode_config import DecodeRecord, resolve_settings
from gpu.queue import Entry, Pending, load_queue, pending_runs, restricted
from gpu.unpack import unpack
from gpu.wave import Machine, pack, preflight, run_wave
from studies.archive import migrate_archive
from studies.catalog import Study, load_study
from studies.runs import queue
from studies.tables import write_archive_tables
from tests.conftest import ROOT, TINY, evaluation_record
from tests.studies.test_archive import evaluated_runs
from utils.errors import UserError

H100 = {"device": "NVIDIA H100 80GB HBM3", "packages": {"torch": "2.11.0"}}


def tiny_study(tmp_path: Path, overrides: list[str] = ()) -> Study:
    base = tmp_path / "configs" / "base.yaml"
    base.parent.mkdir(parents=True, exist_ok=True)
    base.write_text(TINY.format(root=ROOT, cache=tmp_path / "cache"), encoding="utf-8")
    return Study(name="tiny", base_config=base, schemes=["sinusoidal", "alibi"], seeds=[1, 2],
                 out=tmp_path / "runs" / "tiny", overrides=list(overrides),
                 archive=tmp_path / "report" / "tiny")


def archive_complete(study: Study, name: str, seed: int, records: bool = True, folder: Path | None = None) -> Path:
    """An archived run as a finished, tested run leaves it (``records=False``: its evaluations not yet written)."""
    run = (folder or study.archive) / name
    (run / "eval" / "test").mkdir(parents=True)
    manifest = {**H100, "last_finished": "2026-11-27T00:00:00+00:00", "steps": 20, "seed": seed}
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (run / "config.yaml").write_text(f"seed: {seed}\n", encoding="utf-8")
    if records:
        decode = DecodeRecord.of(resolve_settings(study.config("sinusoidal", seed).decode), 0).tree()  # the study's decoding
        (run / "eval" / "test" / "results.json").write_text(json.dumps(evaluation_record(decode=decode)),
                                                             encoding="utf-8")
    return run


def test_the_queue_trains_what_the_archive_lacks_and_resumes_a_half_trained_run(tmp_path):
    study = tiny_study(tmp_path)
    archive_complete(study, "sinusoidal", 1)
    archive_complete(study, "alibi", 1, records=False)  # archived before its test: not done
    half = study.out / "alibi-seed2"
    (half / "checkpoints").mkdir(parents=True)
    (half / "checkpoints" / "last.pt").write_bytes(b"weights")
    (half / "manifest.json").write_text(json.dumps({"steps": 12}), encoding="utf-8")
    entry = Entry(study, tuple(queue(study)), "")
    # training order: each seed's round, attention-acting rows (alibi) before embedding-only ones
    assert entry.runs == (("alibi", 1), ("sinusoidal", 1), ("alibi", 2), ("sinusoidal", 2))
    pending = pending_runs(entry)
    assert pending == [Pending("alibi", 1, 0), Pending("alibi", 2, 12), Pending("sinusoidal", 2, 0)]
    assert queue(restricted(study, pending)) == [("alibi", 1), ("alibi", 2), ("sinusoidal", 2)]
    # a decoding other than the study's makes an archived run pending again (it is re-tested there)
    record = study.archive / "sinusoidal" / "eval" / "test" / "results.json"
    tree = json.loads(record.read_text())
    record.write_text(json.dumps({**tree, "decode": {**tree["decode"], "beam": 9}}), encoding="utf-8")
    assert Pending("sinusoidal", 1, 0) in pending_runs(entry)


def test_the_queue_file_names_its_mistakes_and_the_shipped_one_loads(tmp_path):
    study = tiny_study(tmp_path)
    path = tmp_path / "queue.yaml"
    path.write_text("entries:\n  - {study: tiny, rows: [alibi], seeds: [2]}\n  - {study: tiny, hold: later}\n",
                    encoding="utf-8")
    first, second = load_queue(path, {"tiny": study})
    assert first.runs == (("alibi", 2),) and not first.hold and second.hold == "later" and len(second.runs) == 4
    path.write_text("entries:\n  - {study: tiny, rows: [rope]}\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"queue.yaml: entry 1: rope not rows of 'tiny'"):
        load_queue(path, {"tiny": study})
    path.write_text("entries:\n  - {study: nope}\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"entry 1: no study 'nope'"):
        load_queue(path, {"tiny": study})
    shipped = load_queue()  # gpu/queue.yaml against the declared studies
    assert shipped and all(entry.study.archive is not None for entry in shipped)


def test_each_preflight_refusal_is_one_line(tmp_path):
    study = tiny_study(tmp_path)
    archive_complete(study, "sinusoidal", 1)  # the first archived wave fixed the card and torch
    entry = Entry(study, (("alibi", 1),), "")
    same = Machine("NVIDIA H100 80GB HBM3", "2.11.0")
    assert preflight([entry], same, importable=lambda name: True) == []
    for other, says in ((Machine("NVIDIA H200", "2.11.0"), "this machine is NVIDIA H200 with torch 2.11.0"),
                        (Machine("NVIDIA H100 80GB HBM3", "2.13.0"), "with torch 2.13.0;")):
        (line,) = preflight([entry], other, importable=lambda name: True)
        assert line.startswith("tiny: its archived runs ran on NVIDIA H100 80GB HBM3 with torch 2.11.0") and says in line
    (line,) = preflight([entry], same, importable=lambda name: name != "nltk")
    assert line.startswith("cannot import 'nltk'")
    assert preflight([entry], Machine(None, "2.11.0"), importable=lambda name: True) == [
        "no CUDA device: torch.cuda.is_available() is False on this machine"]
    # the data: a folder that is not there, then a folder that lacks one file
    data = tmp_path / "multi30k"
    local = tiny_study(tmp_path / "local", ["data.source=parallel_text", f"data.dir={data}"])
    local_entry = Entry(local, (("alibi", 1),), "")
    (line,) = preflight([local_entry], same, importable=lambda name: True)
    assert "is not a folder" in line and str(data) in line
    data.mkdir()
    cfg = local.config("alibi", 1).data
    for split in [cfg.train_split, cfg.valid_split, *cfg.test_splits]:
        for lang in (cfg.src_lang, cfg.tgt_lang):
            (data / f"{split}.{lang}").write_text("a\n", encoding="utf-8")
    assert preflight([local_entry], same, importable=lambda name: True) == []
    (data / f"{cfg.test_splits[0]}.{cfg.tgt_lang}").unlink()
    (line,) = preflight([local_entry], same, importable=lambda name: True)
    assert f"missing file for split '{cfg.test_splits[0]}'" in line


FAKE = """
import shutil, sys, time
from pathlib import Path
staging, archive, marker = map(Path, sys.argv[1:4])
Path(marker).with_suffix(".pid").write_text(str(__import__("os").getpid()))
for name in ("alibi", "sinusoidal"):
    shutil.copytree(staging / name, archive / name)   # a run archived whole
    time.sleep(0.5)
shutil.copytree(staging / "alibi-seed2", archive / "alibi-seed2")   # a run being archived: no record yet
marker.write_text("partial")
time.sleep(float(sys.argv[4]))
"""


def fake_wave(tmp_path: Path, sleep: float) -> tuple[Study, Entry, list[str]]:
    study = tiny_study(tmp_path)
    staging = tmp_path / "staging"
    for name, seed, records in (("alibi", 1, True), ("sinusoidal", 1, True), ("alibi-seed2", 2, False)):
        archive_complete(study, name, seed, records, folder=staging)
    (study.archive / "testsets").mkdir(parents=True)
    (study.archive / "testsets" / "test.0123abcd.src").write_text("une phrase\n", encoding="utf-8")
    entry = Entry(study, (("alibi", 1), ("sinusoidal", 1), ("alibi", 2)), "")
    command = [sys.executable, "-c", FAKE, str(staging), str(study.archive), str(tmp_path / "marker"), str(sleep)]
    return study, entry, command


def packed_runs(tar_path: Path) -> set[str]:
    with tarfile.open(tar_path, "r:xz") as tar:
        return {Path(name).parts[2] for name in tar.getnames() if name.startswith("report/tiny/")}


def test_sigterm_in_the_middle_of_a_wave_packs_the_finished_runs_and_no_partial_one(tmp_path):
    study, entry, command = fake_wave(tmp_path, sleep=60)
    marker = tmp_path / "marker"

    def terminate_once_the_third_run_is_half_written():
        deadline = time.monotonic() + 30
        while not marker.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_once_the_third_run_is_half_written, daemon=True).start()
    lines: list[str] = []
    summary = run_wave([entry], tmp_path / "out", limit_s=120, root=tmp_path, margin_s=10, grace_s=5, poll_s=0.1,
                       command=lambda e: command, log=lines.append)
    assert summary.stopped_by == "SIGTERM" and summary.done == 2 and summary.updates == 40
    assert packed_runs(tmp_path / "out" / "tiny.tar.xz") == {"alibi", "sinusoidal", "testsets"}
    with pytest.raises(ProcessLookupError):  # the child was stopped, not left training
        os.kill(int((tmp_path / "marker.pid").read_text()), 0)
    assert lines[-1].startswith("[wave] 2 runs done, 40 updates in ") and "stopped by SIGTERM" in lines[-1]
    assert "next: tiny: 1 run (alibi-seed2)" in lines[-1]
    assert signal.getsignal(signal.SIGTERM) is not None  # the previous handler is back


def test_the_deadline_stops_a_wave_and_packs_what_finished(tmp_path):
    _, entry, command = fake_wave(tmp_path, sleep=60)
    start = time.monotonic()
    summary = run_wave([entry], tmp_path / "out", limit_s=14, root=tmp_path, margin_s=10, grace_s=5, poll_s=0.1,
                       start_room_s=0, command=lambda e: command, log=lambda line: None)
    assert time.monotonic() - start < 30
    assert summary.stopped_by == "the deadline" and summary.done == 2
    assert packed_runs(tmp_path / "out" / "tiny.tar.xz") == {"alibi", "sinusoidal", "testsets"}


def test_a_pack_brought_home_makes_the_tables_of_the_whole_archive_to_the_byte(tmp_path, capsys):
    # the whole archive, its tables made at home once
    full = tmp_path / "full" / "report" / "tiny"
    for run in evaluated_runs(tmp_path / "made").values():
        shutil.copytree(run, full / run.name)
        manifest = full / run.name / "manifest.json"  # what the cost table reads
        timing = {"started": "2026-11-27T00:00:00+00:00", "train_seconds": 60.0}
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), **timing}), encoding="utf-8")
    migrate_archive(full)
    declared = tmp_path / "tiny.yaml"
    config = tmp_path / "run.yaml"
    config.write_text("model:\n  positional:\n    name: sinusoidal\n", encoding="utf-8")
    declared.write_text(yaml.safe_dump({"config": str(config), "schemes": ["sinusoidal", "rope"], "seeds": [1, 2],
                                        "out": str(tmp_path / "out"), "archive": str(full), "metrics": ["chrf"]}))
    tables = write_archive_tables(load_study(declared), studies={})
    made = {p.name: p.read_bytes() for p in full.iterdir() if p.suffix in (".md", ".csv")}
    assert {p.name for p in tables} == set(made) and len(made) >= 8  # the Markdown tables and their CSVs, all returned
    # a wave on another machine brings rope-1 back: home has the rest of the archive and no tables
    wave = tmp_path / "wave"
    shutil.copytree(full.parent.parent, wave)
    pack_file = pack("tiny", wave / "report" / "tiny", [wave / "report" / "tiny" / "rope-1"],
                     tmp_path / "tiny.tar.xz", wave)
    home = tmp_path / "home" / "report" / "tiny"
    shutil.copytree(full, home, ignore=shutil.ignore_patterns("*.md", "*.csv", "rope-1"))
    declared.write_text(declared.read_text().replace(str(full), str(home)))
    result = unpack(pack_file, tmp_path / "home", {"tiny": load_study(declared)})
    assert result.added == ["rope-1"] and result.replaced == []
    assert {name: (home / name).read_bytes() for name in made} == made
    assert sorted(result.tables) == sorted(made)
    assert "runs added: 1 (rope-1); replaced: 0; tables changed: " in result.summary()


def test_a_pack_with_a_path_outside_its_archive_writes_nothing(tmp_path):
    study = tiny_study(tmp_path)
    study.archive.mkdir(parents=True)
    evil = tmp_path / "tiny.tar.xz"
    with tarfile.open(evil, "w:xz") as tar:
        for name in ("report/tiny/alibi/config.yaml", "report/tiny/../../outside.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, __import__("io").BytesIO(b"x\n"))
    with pytest.raises(UserError, match=r"member 'report/tiny/\.\./\.\./outside\.txt' is not a plain file inside"):
        unpack(evil, tmp_path, {"tiny": study})
    assert not (study.archive / "alibi").exists() and not (tmp_path.parent / "outside.txt").exists()


def test_study_missing_trains_nothing_when_the_archive_holds_every_selected_run(capsys):
    from nmt.study import main

    assert main(["demo-kernels-default", "--missing"]) is None  # its four runs are archived under report/
    out = capsys.readouterr().out
    assert "[demo-kernels-default] nothing to train: every selected run is archived in" in out
    assert "trained in" not in out
