"""``python -m nmt``: one command with a subcommand per thing users do; the card's scripts are
shells over the same subcommands, with the same flags."""
from __future__ import annotations

import subprocess
import sys

import pytest

from nmt.__main__ import COMMANDS
from tests.conftest import ROOT

SHELLS = {"train.py": "train", "inference.py": "translate", "test.py": "test", "visualize.py": "visualize"}


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_command_lists_every_subcommand():
    result = run("-m", "nmt", "--help")
    assert result.returncode == 0, result.stderr
    assert set(COMMANDS) == {"train", "translate", "test", "visualize", "study", "bench", "export", "docs", "report",
                             "archive", "gpu", "data", "scheme"}
    for name in COMMANDS:
        assert f"\n    {name} " in result.stdout, name  # each with its one-line summary


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_subcommand_has_its_help(name):
    result = run("-m", "nmt", name, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m nmt {name} "), result.stdout[:200]


@pytest.mark.parametrize("script", list(SHELLS))
def test_the_card_scripts_are_the_subcommands_with_the_same_flags(script):
    shell, command = run(script, "--help"), run("-m", "nmt", SHELLS[script], "--help")
    assert shell.returncode == command.returncode == 0
    assert shell.stdout == command.stdout


def test_an_unknown_subcommand_or_option_is_refused_with_exit_2():
    unknown = run("-m", "nmt", "trian")
    assert unknown.returncode == 2 and "invalid choice: 'trian'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    bad_flag = run("-m", "nmt", "train", "--config", "configs/synthetic/base.yaml", "--bogus")
    assert bad_flag.returncode == 2 and "python -m nmt train: error: unrecognized arguments: --bogus" in bad_flag.stderr
