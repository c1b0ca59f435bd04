"""The suite is an installable package: ``pip install .`` puts its packages (and the configs the
study declarations name) where Python finds them, with one console script, ``nmt``; and the way in
stays one: only the entry points carry a ``__main__`` guard."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.test_layers import PACKAGES

# python -m nmt, and the card's four scripts (shells over it)
ENTRY_POINTS = {"nmt/__main__.py", "train.py", "inference.py", "test.py", "visualize.py"}
NOT_THE_PACKAGE = {".venv", "runs", "report", "build", "tests", ".git", "mutants"}


def has_main_guard(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = {getattr(n, "id", None) for n in ast.walk(node.test)}
            strings = {getattr(n, "value", None) for n in ast.walk(node.test)}
            if "__name__" in names and "__main__" in strings:
                return True
    return False


def test_only_the_entry_points_carry_a_main_guard():
    """A module's tool is reached through ``python -m nmt`` (e.g. ``nmt gpu check``), not run
    as a script of its own."""
    guarded = {path.relative_to(ROOT).as_posix() for path in ROOT.rglob("*.py")
               if not NOT_THE_PACKAGE & set(path.relative_to(ROOT).parts) and has_main_guard(path)}
    assert guarded == ENTRY_POINTS


def test_the_guard_finder_sees_a_guard(tmp_path):
    script = tmp_path / "tool.py"
    script.write_text('def main():\n    pass\n\n\nif __name__ == "__main__":\n    main()\n', encoding="utf-8")
    assert has_main_guard(script)
    script.write_text('NAME = "__main__"\n', encoding="utf-8")
    assert not has_main_guard(script)


TINY_INSTALLED = """
base: {site}/configs/synthetic/base.yaml
data:
  cache_dir: cache
  synthetic:
    train: {{size: 300, min_words: 3, max_words: 6}}
    validation: {{size: 10, min_words: 3, max_words: 6}}
    test: {{size: 10, min_words: 3, max_words: 6}}
tokenizer: {{vocab_size: 120}}
model: {{d_model: 32, n_heads: 2, n_encoder_layers: 1, n_decoder_layers: 1, d_ff: 64}}
train: {{max_tokens: 300, max_steps: 20, eval_every: 20, valid_bleu_sentences: 5}}
"""


def test_the_installed_package_trains_and_translates_from_another_directory(tmp_path):
    """``pip install --no-deps --target SITE .`` (the dependencies are this interpreter's), then the
    console script from a folder that is not the checkout: its help, a tiny synthetic training
    from the installed configs, and a translation with the run."""
    source, site, work = tmp_path / "source", tmp_path / "site", tmp_path / "elsewhere"
    work.mkdir()
    # what the build reads, copied: setuptools builds in the source tree (build/ and *.egg-info)
    for name in (*PACKAGES, "configs"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "requirements.txt"):
        shutil.copy2(ROOT / name, source / name)
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                                str(source)], cwd=work, capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    env = {**os.environ, "PYTHONPATH": str(site)}

    def nmt(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([str(site / "bin" / "nmt"), *args], cwd=work, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    where = subprocess.run([sys.executable, "-c", "import nmt, studies; print(nmt.__file__); print(studies.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert all(Path(line).is_relative_to(site) for line in where.stdout.split()), where.stdout + where.stderr
    assert "train" in nmt("--help").stdout and "usage:" in nmt("gpu", "check", "--help").stdout
    (work / "tiny.yaml").write_text(TINY_INSTALLED.format(site=site), encoding="utf-8")
    nmt("train", "--config", "tiny.yaml", "--run-dir", "run")
    assert (work / "run" / "checkpoints" / "best.pt").is_file()
    translated = nmt("translate", "--run", "run", "--greedy", "Je la vois .", "Il mange .")
    assert len(translated.stdout.splitlines()) == 2
