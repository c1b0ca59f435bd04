"""A study's archive stores each test set once: runs archived in that layout, an old archive
migrated to it (its tables the same to the byte), joined sets rebuilt and checked, the old layout
refused in one line naming the command that migrates it."""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from experiment.config import load_config, to_dict
from nmt import archive as archive_command
from scoring.compare import compare
from scoring.metrics import bootstrap_samples
from scoring.texts import hypotheses_of, references_of, sources_of
from studies.archive import archive_run, migrate_archive
from studies.catalog import Study
from studies.tables import archived_runs
from tests.scoring.test_statistics import corpus, degrade, write_evaluated_run
from utils.errors import UserError

SOURCES = [f"la phrase numéro {i} ." for i in range(40)]


def joined(lines: list[str], k: int) -> list[str]:
    """Varis and Bojar's joined inputs, written out here: k consecutive lines, a space between."""
    return [" ".join(lines[i:i + k]) for i in range(0, len(lines) - len(lines) % k, k)]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def evaluated_runs(folder: Path, refs: list[str] | None = None) -> dict[str, Path]:
    """Three run folders as ``nmt test --concat 2`` leaves them (sources, references, hypotheses and
    record of ``test`` and of ``test_concat2``), records of the version before the checksums."""
    config, refs = to_dict(load_config(None)), refs or corpus(40, 3)
    indices = bootstrap_samples(len(refs), samples=50)
    runs = {}
    for i, (scheme, seed, share) in enumerate([("sinusoidal", 1, 0.3), ("sinusoidal", 2, 0.35), ("rope", 1, 0.1)]):
        run = runs[f"{scheme}-{seed}"] = folder / f"{scheme}-{seed}"
        hyps = degrade(refs, share, i)
        write_evaluated_run(run, config, scheme, seed, hyps, refs, indices)
        (run / "eval" / "test" / "srcs.txt").write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
        pair = run / "eval" / "test_concat2"
        pair.mkdir()
        record = json.loads((run / "eval" / "test" / "results.json").read_text(encoding="utf-8"))
        (pair / "results.json").write_text(json.dumps({**record, "testset": "test_concat2"}), encoding="utf-8")
        for name, lines in (("srcs.txt", SOURCES), ("refs.txt", refs), ("hyps.txt", hyps)):
            (pair / name).write_text("\n".join(joined(lines, 2)) + "\n", encoding="utf-8")
    return runs


def test_an_archived_run_keeps_its_hypotheses_compressed_and_each_test_set_once(tmp_path):
    runs = evaluated_runs(tmp_path / "runs")
    archive = tmp_path / "archive"
    for run in runs.values():
        archive_run(run, archive / run.name)
    stored = sorted(p.name for p in (archive / "testsets").iterdir())
    assert len(stored) == 2 and stored[0].startswith("test.") and stored[0].endswith(".ref")  # joined sets never
    src = archive / "testsets" / stored[1]
    assert src.read_bytes() == (runs["rope-1"] / "eval" / "test" / "srcs.txt").read_bytes()
    for run in runs.values():
        for name in ("test", "test_concat2"):
            own, kept = run / "eval" / name, archive / run.name / "eval" / name
            assert sorted(p.name for p in kept.iterdir()) == ["hyps.txt.gz", "results.json"]
            assert gzip.decompress((kept / "hyps.txt.gz").read_bytes()) == (own / "hyps.txt").read_bytes()
            record = json.loads((kept / "results.json").read_text(encoding="utf-8"))
            assert record["sources_sha256"] == sha256(own / "srcs.txt")
            assert record["references_sha256"] == sha256(own / "refs.txt")
            assert record["bleu"] == json.loads((own / "results.json").read_text(encoding="utf-8"))["bleu"]
            # read back as the tables read them: the joined set rebuilt from the stored one
            assert sources_of(kept.parent.parent, name) == (own / "srcs.txt").read_text(encoding="utf-8").splitlines()
            assert references_of(kept.parent.parent, name) == (own / "refs.txt").read_text(encoding="utf-8").splitlines()
            assert hypotheses_of(kept.parent.parent, name) == (own / "hyps.txt").read_text(encoding="utf-8").splitlines()
    # the same hypotheses give the same bytes (no time stamp in the gzip header)
    again = tmp_path / "again"
    archive_run(runs["rope-1"], again / "rope-1")
    assert (again / "rope-1/eval/test/hyps.txt.gz").read_bytes() == (archive / "rope-1/eval/test/hyps.txt.gz").read_bytes()


def old_archive(tmp_path: Path, refs: list[str] | None = None) -> Path:
    """An archive of the layout before: every run folder copied whole, its test sets with it."""
    runs = evaluated_runs(tmp_path / "runs", refs)
    archive = tmp_path / "archive"
    for run in runs.values():
        shutil.copytree(run, archive / run.name)
    return archive


def test_an_old_archive_is_refused_then_migrated_and_its_tables_are_the_same_to_the_byte(tmp_path, capsys):
    archive = old_archive(tmp_path)
    runs = sorted(archive.iterdir())
    before = [compare(runs, name) for name in ("test", "test_concat2")]
    size = sum(p.stat().st_size for p in archive.rglob("*") if p.is_file())
    study = Study(name="old", base_config=Path("base.yaml"), schemes=["sinusoidal", "rope"], seeds=[1, 2], out=tmp_path / "out", archive=archive)
    with pytest.raises(UserError) as err:
        archived_runs(study)
    assert str(err.value).endswith(f"migrate it once: python -m nmt archive migrate {archive}")
    assert "\n" not in str(err.value)

    archive_command.main(["migrate", str(archive)])
    assert "6 evaluations migrated" in capsys.readouterr().out
    assert archived_runs(study) == runs
    assert [compare(runs, name) for name in ("test", "test_concat2")] == before
    assert sum(p.stat().st_size for p in archive.rglob("*") if p.is_file()) < size
    files = sorted(p.relative_to(archive).as_posix() for p in archive.rglob("*") if p.is_file())
    assert migrate_archive(archive).evaluations == 0  # in the layout already: left as it is
    assert sorted(p.relative_to(archive).as_posix() for p in archive.rglob("*") if p.is_file()) == files


def test_a_migration_stopped_while_it_removed_the_copies_is_finished_by_running_it_again(tmp_path):
    archive = old_archive(tmp_path)
    runs = sorted(archive.iterdir())
    before = compare(runs, "test")
    migrate_archive(archive)
    folder = archive / "rope-1" / "eval" / "test"
    (folder / "refs.txt").write_bytes(next((archive / "testsets").glob("*.ref")).read_bytes())  # left behind
    with pytest.raises(UserError, match="old layout"):
        archived_runs(Study(name="old", base_config=Path("b.yaml"), schemes=["rope"], seeds=[1], out=tmp_path / "out", archive=archive))
    assert migrate_archive(archive).evaluations == 1
    assert sorted(p.name for p in folder.iterdir()) == ["hyps.txt.gz", "results.json"]
    assert compare(runs, "test") == before


def test_a_stored_test_set_that_is_not_the_one_scored_is_refused(tmp_path):
    archive = old_archive(tmp_path)
    migrate_archive(archive)
    ref = next((archive / "testsets").glob("*.ref"))
    ref.write_text(ref.read_text(encoding="utf-8").replace("a", "e"), encoding="utf-8")
    for name in ("test", "test_concat2"):
        with pytest.raises(UserError, match=r"rope-1/eval/" + name + ": no test set stored under .*testsets matches"):
            references_of(archive / "rope-1", name)


def test_runs_given_other_texts_under_one_name_keep_their_own(tmp_path):
    archive = old_archive(tmp_path)
    other = tmp_path / "other"
    shutil.copytree(old_archive(other, refs=corpus(40, 9)) / "rope-1", archive / "rope-9")
    migrate_archive(archive)
    assert len(list((archive / "testsets").glob("test.*.ref"))) == 2
    assert references_of(archive / "rope-9", "test") == corpus(40, 9)
    assert references_of(archive / "rope-1", "test") == corpus(40, 3)
    assert references_of(archive / "rope-9", "test_concat2") == joined(corpus(40, 9), 2)


def test_the_command_names_a_missing_folder(tmp_path):
    with pytest.raises(UserError, match="nowhere: no such archive folder"):
        archive_command.main(["migrate", str(tmp_path / "nowhere")])
