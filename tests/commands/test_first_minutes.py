"""README's "one scheme in a minute" block, walked as written: each line run in a scratch folder
laid out as a clone (the checkout's configs beside it), in order, so the block cannot go stale. The
train line gets a few updates and small test sets appended (a walk of seconds, not a minute); every
other line runs exactly as README shows it, and each must leave what its comment promises."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

from tests.conftest import ROOT

MARKER = "<!-- one scheme in a minute: tests/commands/test_first_minutes.py runs the block below -->"
QUICK = ["train.max_steps=6", "train.eval_every=6", "train.valid_bleu_sentences=8", "data.synthetic.validation.size=8",
         "data.synthetic.test.size=6", "data.synthetic.test_long.size=4", "decode.max_len_b=8"]


def block() -> list[str]:
    """The command lines of the fenced block right after README's marker, comments cut."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(MARKER) + 1
    assert lines[start].startswith("```"), "the marker sits right above the block it names"
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
    return [line for line in lines[start + 1:end] if line.strip()]


def test_readmes_first_scheme_runs_as_written(tmp_path):
    commands = block()
    assert commands[0].startswith("make venv") and len(commands) == 5
    targets = re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)
    assert "venv" in targets  # the first line names a target that exists (the venv itself is this test's)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for line in commands[1:]:
        words = shlex.split(line, comments=True)
        assert words[:3] == [".venv/bin/python", "-m", "nmt"], line
        words = [sys.executable, *words[1:]] + (QUICK if words[3] == "train" else [])
        proc = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (line, proc.stderr[-2000:])
        if words[3] == "train":
            assert proc.stdout.startswith("stopped: budget of 6 updates reached; best validation BLEU")
            assert "ignite" not in proc.stderr  # its internals stay at debug
        if words[3] == "translate":
            assert len(proc.stdout.splitlines()) == 1  # one line for the one sentence (a 6-update model may say nothing)
    run = tmp_path / "runs" / "synthetic" / "sinusoidal"  # where the train line's comment says it goes
    assert (run / "checkpoints" / "best.pt").is_file()
    assert {p.name for p in (run / "eval").iterdir()} >= {"test", "test_long"}  # the test line's two sets
    assert list((run / "pictures").glob("attention_*.png"))  # the visualize line's pictures


def test_bare_nmt_lists_the_commands():
    proc = subprocess.run([sys.executable, "-m", "nmt"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "arguments are required" not in proc.stderr
    from nmt.__main__ import COMMANDS

    listed = re.findall(r"^    (\w+)\s{2,}", proc.stderr, re.M)
    assert listed == list(COMMANDS)  # every command, each with its line


def test_every_commands_help_ends_with_examples_that_parse():
    """Each command's --help ends with "examples:" and command lines its own parser accepts as shown."""
    import importlib

    from nmt.__main__ import COMMANDS

    for command, module in COMMANDS.items():
        parser = importlib.import_module(module).build_parser()
        shown = parser.format_help().rstrip().split("examples:\n")
        assert len(shown) == 2 and shown[1], f"{command} --help ends with no examples"
        for line in shown[1].splitlines():
            words = shlex.split(line.split("|")[-1])
            assert words[:4] == ["python", "-m", "nmt", command], line
            parser.parse_args(words[4:])  # argparse exits (and fails the test) on what it refuses


def test_readmes_list_of_commands_is_the_registry():
    from nmt.__main__ import COMMANDS

    line = next(line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
                if line.startswith(".venv/bin/python -m nmt --help"))
    assert line.split("#", 1)[1].split() == list(COMMANDS)
