"""The layers of DESIGN.md hold: the import-linter contract in .importlinter is kept, it would catch
an upward import, and no package imports one of the four command scripts."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

COMMANDS = {"train", "inference", "test", "visualize"}
PACKAGES = ["studies", "export", "bench", "training", "analysis", "scoring", "search", "experiment", "data", "models",
            "tokenizer", "utils"]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_layers_contract_is_kept():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / ".importlinter", tmp_path / ".importlinter")
    errors = tmp_path / "utils" / "errors.py"
    errors.write_text(errors.read_text(encoding="utf-8") + "\n\ndef _up():\n    import search.beam  # noqa\n",
                      encoding="utf-8")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "utils.errors -> search.beam" in result.stdout and "1 broken" in result.stdout


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_package_imports_a_command_script():
    offenders = [f"{path.relative_to(ROOT)} imports {sorted(imported_modules(path) & COMMANDS)}"
                 for name in PACKAGES for path in (ROOT / name).rglob("*.py") if imported_modules(path) & COMMANDS]
    assert not offenders, offenders
    # and the check itself sees such an import
    assert imported_modules(ROOT / "tests" / "test_commands.py") & COMMANDS == {"test"}
