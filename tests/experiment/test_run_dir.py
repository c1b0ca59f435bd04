"""A run's file names live in ``experiment.run_dir.RunDir`` and the evaluation record's keys in
``scoring.record``: the lists below are written out here, and the code is searched for them."""
from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from experiment.decode_config import DecodeRecord
from experiment.run_dir import ArchiveDir, RunDir
from scoring.record import VERSION, EvalRecord, read_record, write_record
from tests.conftest import ROOT, evaluation_record
from tests.test_layers import PACKAGES
from utils.errors import UserError

RUN_FILES = {"config.yaml", "manifest.json", "metrics.jsonl", "results.json", "hyps.txt", "refs.txt", "srcs.txt",
             "last.pt", "best.pt", "hyps.txt.gz"}
RUN_FOLDERS = {"checkpoints", "eval", "tokenizer", "testsets"}  # searched where a path is joined: ``x / "eval"``
RECORD_KEYS = {"testset", "run", "checkpoint", "step", "scheme", "bleu", "bleu_ci95", "signature", "chrf",
               "chrf_signature", "nltk_bleu4", "nltk_tokenization", "seed_char_bleu4", "seed_char_bleu4_note",
               "n_sentences", "decode", "engine", "seconds", "sentences_per_second", "by_length", "decoding_peak_mib",
               "sources_sha256", "references_sha256", "variant", "version"}
# keys the record shares with other records of the code, read there by subscript: a validation's
# metrics and the metrics log's points ("step", "bleu", "seconds"), the data caches' "version"
SHARED_KEYS = {"step", "bleu", "seconds", "version"}
OWNERS = {"experiment/run_dir.py", "scoring/record.py"}


def code_files() -> list[Path]:
    files = [p for name in PACKAGES for p in (ROOT / name).rglob("*.py")]
    return files + [ROOT / f"{name}.py" for name in ("train", "inference", "test", "visualize")]


def findings(path: Path) -> list[str]:
    """Where ``path`` spells a run's file name, joins a run's folder name, or reads a record key by
    subscript (``r["bleu_ci95"]``, ``r.get("engine")``)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in RUN_FILES:
            found.append(f"{node.lineno}: {node.value!r}")
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
              and node.right.value in RUN_FOLDERS):
            found.append(f"{node.lineno}: / {node.right.value!r}")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and node.slice.value in RECORD_KEYS - SHARED_KEYS:
            found.append(f"{node.lineno}: [{node.slice.value!r}]")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in RECORD_KEYS - SHARED_KEYS):
            found.append(f"{node.lineno}: .get({node.args[0].value!r})")
    return found


def test_the_lists_are_the_owners_names():
    fields = {f.name for f in dataclasses.fields(EvalRecord)}
    assert fields == RECORD_KEYS
    run = RunDir(Path("r"))
    named = {p.name for p in (run.config, run.manifest, run.metrics, run.last, run.best, *(
        getattr(run.evaluation("t"), k) for k in ("record", "hypotheses", "references", "sources",
                                                 "compressed_hypotheses")))}
    assert named == RUN_FILES
    assert {run.checkpoints.name, run.evaluations.name, run.tokenizer.name, ArchiveDir(Path("a")).testsets.name} \
        == RUN_FOLDERS


def test_no_module_but_the_owners_spells_a_run_file_or_reads_a_record_key():
    elsewhere = {path.relative_to(ROOT).as_posix(): found for path in code_files()
                 if path.relative_to(ROOT).as_posix() not in OWNERS and (found := findings(path))}
    assert elsewhere == {}


def test_the_search_finds_what_the_code_used_to_do(tmp_path):
    module = tmp_path / "old.py"
    module.write_text('import json\n\ndef bleu(run_dir):\n    path = run_dir / "eval" / "test" / "results.json"\n'
                      '    return json.loads(path.read_text())["bleu_ci95"], {}.get("engine")\n', encoding="utf-8")
    assert sorted(findings(module)) == ["4: 'results.json'", "4: / 'eval'", "5: .get('engine')", "5: ['bleu_ci95']"]


def record(**changes) -> EvalRecord:
    fields = dict(testset="test", run="runs/x", checkpoint="runs/x/checkpoints/best.pt", step=600, scheme="rope",
                  bleu=41.5, bleu_ci95=(39.0, 44.0), signature="nrefs:1|case:mixed", chrf=60.1, chrf_signature="chrF2",
                  nltk_bleu4=40.2, nltk_tokenization="13a", seed_char_bleu4=0.7, seed_char_bleu4_note="note",
                  n_sentences=30, decode=DecodeRecord(beam=3, len_penalty=1.0, max_len_a=1.5, max_len_b=10, batch_size=64,
                                                       cut_sources=0, stopping="exact"), engine="torch", seconds=1.5, sentences_per_second=20.0,
                  by_length=[{"bucket": "1-10", "bleu": 41.5}])
    return EvalRecord(**{**fields, **changes})


def test_a_record_round_trips_and_an_archived_version_1_record_is_migrated_on_read(tmp_path):
    path = tmp_path / "results.json"
    write_record(path, record(engine="ctranslate2"))
    assert read_record(path) == record(engine="ctranslate2")
    assert json.loads(path.read_text())["version"] == VERSION
    old = {k: v for k, v in dataclasses.asdict(record()).items() if k not in ("version", "engine")}
    path.write_text(json.dumps(old))  # as every record archived before the engine option
    assert read_record(path) == record(engine="torch")
    assert path.read_text() == json.dumps(old)  # read, never rewritten
    two = {k: v for k, v in dataclasses.asdict(record()).items() if k not in ("sources_sha256", "references_sha256")}
    path.write_text(json.dumps({**two, "version": 2}))  # before the checksums of the texts scored
    assert read_record(path) == record() and read_record(path).sources_sha256 is None


@pytest.mark.parametrize("tree, says", [({"bleu": 1.0}, "missing key 'testset'"),
                                        ({**json.loads(json.dumps(dataclasses.asdict(record()))), "meteor": 3},
                                         "unknown key 'meteor'"),
                                        ({"version": VERSION + 1}, "newer than this code's")])
def test_a_foreign_record_is_one_line_naming_the_file(tmp_path, tree, says):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(tree))
    with pytest.raises(UserError, match=says) as err:
        read_record(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("decode", [
    {"beam": 5, "len_penalty": 1.0, "max_len_a": 1.2, "max_len_b": 10, "batch_size": 64, "cut_sources": 0},  # no rule named
    {"beam": 5, "len_penalty": 1.0, "max_len_a": 1.5, "max_len_b": 10, "stopping": "exact", "batch_size": 64,
     "cut_sources": 2},
    {"beam": 1, "len_penalty": 1.0, "max_len_a": 1.5, "max_len_b": 10, "stopping": "exact", "batch_size": 64,
     "cut_sources": 0, "oracle_length": True},
])
def test_a_records_decode_settings_are_typed_and_written_back_as_they_were_read(tmp_path, decode):
    """The three shapes of ``decode`` the archives hold read into a typed record whose fields are the
    JSON's, and written back with the same keys in the same order (an archive rewritten by a migration
    stays what it was); the rule a table compares reads an unnamed stopping rule as fairseq's."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps(evaluation_record(decode=decode)), encoding="utf-8")
    read = read_record(path)
    assert (read.decode.beam, read.decode.cut_sources, read.decode.stopping) == (
        decode["beam"], decode["cut_sources"], decode.get("stopping"))
    write_record(tmp_path / "again.json", read)
    assert list(json.loads((tmp_path / "again.json").read_text())["decode"].items()) == list(decode.items())
    expected_stopping = None if decode["beam"] == 1 else decode.get("stopping", "first_k")
    assert read.decode.rule()["stopping"] == expected_stopping
    assert read.decode.rule()["oracle_length"] is decode.get("oracle_length", False)


@pytest.mark.parametrize("change, named", [({"beem": 5}, "unknown key 'decode.beem'"),
                                           ({"max_len_b": None}, "missing key 'decode.max_len_b'")])
def test_a_records_decode_with_a_key_unknown_or_missing_is_one_line_naming_it(tmp_path, change, named):
    decode = {"beam": 5, "len_penalty": 1.0, "max_len_a": 1.5, "max_len_b": 10, "batch_size": 64, "cut_sources": 0}
    decode = {k: v for k, v in {**decode, **change}.items() if v is not None}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(evaluation_record(decode=decode)), encoding="utf-8")
    with pytest.raises(UserError, match=f"results.json: not an evaluation record of version 3 \\({named}\\)"):
        read_record(path)
