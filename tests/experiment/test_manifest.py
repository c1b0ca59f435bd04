"""The run manifest is typed and owned by ``experiment.manifest``: written and read back as a
``Manifest``, an archived version-1 manifest migrated on read and never rewritten, a foreign one a
one-line error, and no other module reading the file."""
from __future__ import annotations

import ast
import json

import pytest

from experiment.config import Config
from experiment.manifest import FIELDS, VERSION, Manifest, read_manifest, write_manifest
from experiment.run_dir import RunDir
from tests.conftest import ROOT
from tests.experiment.test_run_dir import code_files
from utils.errors import UserError


def test_a_written_manifest_reads_back_typed_and_refuses_unknown_fields(tmp_path):
    assert read_manifest(tmp_path) == Manifest() and not Manifest().finished  # none yet: empty
    written = write_manifest(tmp_path, Config(), "cpu", "data-1", steps=20, precision="fp32",
                             last_finished="2026-11-27T00:00:00+00:00", stopped_by=None)
    read = read_manifest(tmp_path)
    assert read == written and read.version == VERSION and read.finished and read.on_cpu
    assert (read.steps, read.precision, read.data_fingerprint, read.train_seconds) == (20, "fp32", "data-1", 0.0)
    assert read.threads >= 1 and read.cpu_kernels  # this machine's, as host_record gives them
    stopped = write_manifest(tmp_path, Config(), "cpu", "data-1", train_seconds=12.34, stopped_by="SIGTERM")
    assert not stopped.finished and read_manifest(tmp_path).train_seconds == 12.3
    with pytest.raises(TypeError, match="not manifest fields: stepz"):
        write_manifest(tmp_path, Config(), "cpu", "data-1", stepz=3)


def test_an_archived_version_1_manifest_is_migrated_on_read_and_never_rewritten(tmp_path):
    old = {"started": "2026-11-20T10:00:00+00:00", "device": "cpu (x86_64, 2 threads)", "seed": 1, "steps": 800,
           "last_finished": "2026-11-20T11:00:00+00:00", "parameters": 7578624}
    path = RunDir(tmp_path).manifest
    path.write_text(json.dumps(old))  # as the manifests archived before threads and version were recorded
    manifest = read_manifest(tmp_path)
    assert (manifest.threads, manifest.version, manifest.train_seconds, manifest.precision) == (2, VERSION, None, None)
    assert manifest.finished and manifest.parameters == 7578624
    assert path.read_text() == json.dumps(old)
    recorded = {**old, "threads": 1}  # a recorded thread count wins over the device's name
    path.write_text(json.dumps(recorded))
    assert read_manifest(tmp_path).threads == 1


@pytest.mark.parametrize("text, says", [('{"started": "t", "meteor": 3}', "unknown key 'meteor'"),
                                        (json.dumps({"version": VERSION + 1}), "newer than this code's"),
                                        ("{not json", "cannot read the run manifest")])
def test_a_foreign_manifest_is_one_line_naming_the_file(tmp_path, text, says):
    path = RunDir(tmp_path).manifest
    path.write_text(text)
    with pytest.raises(UserError, match=says) as err:
        read_manifest(tmp_path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_every_archived_manifest_reads_as_a_manifest():
    paths = list((ROOT / "report").rglob("manifest.json"))
    assert paths
    for path in paths:
        assert isinstance(read_manifest(path.parent), Manifest)
    assert set(json.loads(paths[0].read_text())) <= set(FIELDS)


def manifest_paths(path) -> list[int]:
    """The lines where ``path`` takes a run's manifest file: ``RunDir(...).manifest``, or ``.manifest`` of a name
    bound to a ``RunDir(...)`` (a loaded run's ``manifest`` is the typed record, read by ``experiment.manifest``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def is_run_dir(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "RunDir"
    bound = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and is_run_dir(node.value)
             for target in node.targets if isinstance(target, ast.Name)}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "manifest"
            and (is_run_dir(node.value) or isinstance(node.value, ast.Name) and node.value.id in bound)]


def test_no_module_but_the_owner_reads_the_manifest_file(tmp_path):
    """Only ``experiment.manifest`` takes DIR/manifest.json's path (``RunDir.manifest``, which
    ``experiment.run_dir`` names): a module reading its keys itself would go around the typed
    record and its migration."""
    takers = {str(path.relative_to(ROOT)) for path in code_files() if manifest_paths(path)}
    assert takers <= {"experiment/manifest.py", "experiment/run_dir.py"}, takers
    old = tmp_path / "old.py"  # what scoring/cost.py did before the record was typed
    old.write_text("import json\n\ndef threads(run):\n    return json.loads(RunDir(run).manifest.read_text())['threads']\n")
    assert manifest_paths(old) == [4]
    bound = tmp_path / "bound.py"  # the same through a name, beside a loaded run's typed record (not a file)
    bound.write_text("def threads(run, loaded):\n    files = RunDir(run)\n    return files.manifest, loaded.manifest.threads\n")
    assert manifest_paths(bound) == [3]
