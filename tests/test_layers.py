"""The layers of ARCHITECTURE.md hold: the import-linter contracts in pyproject.toml are kept, it would catch
an upward import, and no package imports one of the four command scripts."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT

COMMANDS = {"train", "inference", "test", "visualize"}
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["root_packages"]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_layers_contract_is_kept():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def verdict(output: str, contract: str) -> str:
    """KEPT or BROKEN: what lint-imports said of the contract whose name starts with ``contract``."""
    found = re.search(re.escape(contract) + r".*?(KEPT|BROKEN)", output, re.S)
    assert found, output
    return found.group(1)


def copy_with_import(tmp_path: Path, module: str, imported: str) -> subprocess.CompletedProcess:
    """lint-imports on a copy of the packages in which ``module`` (a path) also imports ``imported``."""
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n\ndef _added():\n    import {imported}  # noqa\n",
                    encoding="utf-8")
    return lint_imports(tmp_path)


def test_an_upward_import_breaks_the_contract(tmp_path):
    result = copy_with_import(tmp_path, "utils/errors.py", "search.beam")
    assert result.returncode != 0
    assert "utils.errors -> search.beam" in result.stdout
    assert verdict(result.stdout, "Imports flow one way") == "BROKEN"


def test_the_contract_names_no_exception_and_the_config_may_not_import_upwards(tmp_path):
    """The whole Config is assembled from sections that all sit at or below ``experiment``: the
    contract lists no ignored import, and the assembly importing a section's reader from above
    (as it once imported training.config and search.config) would break it."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    assert [c["type"] for c in contracts] == ["layers", "layers", "forbidden"]
    assert not any("ignore_imports" in c for c in contracts)
    result = copy_with_import(tmp_path, "experiment/config.py", "training.loop")
    assert result.returncode != 0 and "experiment.config -> training.loop" in result.stdout
    assert verdict(result.stdout, "Imports flow one way") == "BROKEN"


def test_the_study_lifecycle_reaches_executors_only_through_the_registry(tmp_path):
    """The driver choosing a scheduler's code itself (as it once did with ``if name == ...``) would
    break the study contracts; so would the executors importing the lifecycle above them."""
    result = copy_with_import(tmp_path, "studies/driver.py", "studies.cluster")
    assert result.returncode != 0 and "studies.driver -> studies.cluster" in result.stdout
    assert verdict(result.stdout, "The lifecycle reaches a scheduler") == "BROKEN"
    shutil.rmtree(tmp_path)
    tmp_path.mkdir()
    result = copy_with_import(tmp_path, "studies/executors.py", "studies.driver")
    assert result.returncode != 0 and verdict(result.stdout, "A study's one lifecycle") == "BROKEN"


def test_no_study_module_above_the_registry_names_an_executor():
    """The lifecycle, the command and the tables never branch on an executor's name: no string
    literal of theirs is one (the names live in studies/executor_settings.py and the registry's classes)."""
    from studies.executor_settings import EXECUTORS

    for path in [ROOT / "nmt" / "study.py", *(ROOT / "studies" / f"{name}.py" for name in ("driver", "tables", "runs",
                                                                                        "catalog"))]:
        literals = {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                    if isinstance(node, ast.Constant) and isinstance(node.value, str)}
        assert not literals & set(EXECUTORS), f"{path.name} names {sorted(literals & set(EXECUTORS))}"


def name_branches(source: str, names: set[str]) -> list[int]:
    """Lines of ``source`` that compare a value with one of ``names`` (``==``, ``!=``, ``in``, ``not in``
    a literal holding one, or a ``match`` case of one)."""
    def names_one(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Constant) and n.value in names for n in ast.walk(node))

    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                 for op in node.ops):
            if names_one(node):
                lines.append(node.lineno)
        elif isinstance(node, ast.match_case) and names_one(node.pattern):
            lines.append(node.pattern.lineno)
    return lines


def test_nothing_branches_on_a_schedulers_or_executors_name(tmp_path):
    """A scheduler's ways are its object's (``utils.job_schedulers``), an executor's its class's: no
    module compares a value with an executor's name (the scheduler module alone knows the
    environment variables and commands of each)."""
    from studies.executor_settings import EXECUTORS

    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in (".venv", "runs", "tests"):
            continue
        if lines := name_branches(path.read_text(encoding="utf-8"), set(EXECUTORS)):
            found[str(relative)] = lines
    assert found == {}
    planted = 'if settings.name == "slurm":\n    pass\nok = name in ("x", "y")\nbad = job["scheduler"] != "submitit-local"\n'
    assert name_branches(planted, set(EXECUTORS)) == [1, 4]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_package_imports_a_command_script(tmp_path):
    offenders = [f"{path.relative_to(ROOT)} imports {sorted(imported_modules(path) & COMMANDS)}"
                 for name in PACKAGES for path in (ROOT / name).rglob("*.py") if imported_modules(path) & COMMANDS]
    assert not offenders, offenders
    # and the check itself sees such an import
    probe = tmp_path / "imports_a_script.py"
    probe.write_text("import os\nimport test as t\nfrom visualize import main\n", encoding="utf-8")
    assert imported_modules(probe) & COMMANDS == {"test", "visualize"}


def test_nothing_imports_a_module_named_test():
    """``test`` is the standard library's package of Python's own tests; the ``test`` command is
    ``nmt.evaluate`` (``test.py`` is only a shell that nothing imports)."""
    offenders = [str(path.relative_to(ROOT)) for path in ROOT.rglob("*.py")
                 if not path.is_relative_to(ROOT / ".venv") and not path.is_relative_to(ROOT / "runs")
                 and "test" in imported_modules(path)]
    assert not offenders, offenders


def scheme_lists(source: str) -> list[tuple[int, list[str]]]:
    """(line, names) of every list, tuple, set or dict literal in ``source`` holding two or more
    registered scheme names."""
    from models.positional import SCHEMES

    found = []
    for node in ast.walk(ast.parse(source)):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)) and items:
            names = [i.value for i in items if isinstance(i, ast.Constant) and i.value in SCHEMES]
            if len(names) >= 2:
                found.append((node.lineno, names))
    return found


def test_no_module_outside_the_schemes_spells_out_a_list_of_scheme_names():
    """What a scheme can do lives on its class (adds_score_bias, its card, ...) and studies
    name their schemes in YAML: a hand-kept list elsewhere would silently miss a new scheme."""
    assert scheme_lists('SOME = ["rope", "t5"]\nOK = ("rope", "other")\n') == [(1, ["rope", "t5"])]
    offenders = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in (".venv", "runs", "tests") or relative.parts[:2] == ("models", "positional"):
            continue
        if hits := scheme_lists(path.read_text(encoding="utf-8")):
            offenders[str(relative)] = hits
    assert offenders == {}


MAX_FUNCTION_LINES = 60  # about a screen of code and docstring, with no exception


def long_functions(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] in (".venv", "runs", "tests"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{relative}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_longer_than_a_screen(tmp_path):
    assert not long_functions(ROOT), long_functions(ROOT)
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n", encoding="utf-8")
    assert long_functions(tmp_path) == [f"long.py:1 f ({MAX_FUNCTION_LINES + 1} lines)"]
