"""Every command's options say what they do: each has a help text, none holds a measurement or a
date (figures belong in report.md and docs/performance.md), and ``--help`` of every benchmark tool
prints its usage and exits without starting the benchmark."""
from __future__ import annotations

import argparse
import importlib
import re

import pytest

import bench
from nmt.__main__ import COMMANDS

PARSERS = {f"python -m nmt {name}": module for name, module in COMMANDS.items()}
PARSERS.update({f"python -m nmt bench {tool}": module for tool, module in bench.TOOLS.items()})
# a speed ratio (1.28x), a percentage, a timing or throughput, a date: what a help text must not hold
MEASUREMENT = re.compile(r"\d[\d.,]*\s?[x×](?![a-z])|\d\s?%|\d[\d.,]*\s?(?:ms|s|sent/s|tokens/s|GFLOP/s|MB|GB)\b"
                         r"|20\d\d-\d\d-\d\d")


def actions(parser: argparse.ArgumentParser, prefix: str = ""):
    """(where, action) of every option and positional, subcommands' included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from actions(sub, f"{prefix} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield f"{prefix} {'/'.join(action.option_strings) or action.dest}".strip(), action


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_option_has_a_help_text_without_measurements(command):
    parser = importlib.import_module(PARSERS[command]).build_parser()
    assert parser.description and not MEASUREMENT.search(parser.description), command
    for where, action in actions(parser):
        assert action.help and action.help.strip(), f"{command} {where}: no help text"
        assert not MEASUREMENT.search(action.help), f"{command} {where}: a measurement in its help: {action.help!r}"


def test_the_measurement_pattern_finds_what_the_help_texts_used_to_hold():
    for lore in ("two 1-thread runs side by side did 0.99-1.28x the updates", "12.7 sentences/s took 3.2 s",
                 "measured 2026-11-23", "40% faster"):
        assert MEASUREMENT.search(lore), lore
    for meaning in ("(default 64)", "intra-op CPU threads (default 1)", "int8_float32", "best | last | avg | PATH",
                    "max_len_a * source_length + max_len_b", "sentence pairs (default 40,000,000)"):
        assert not MEASUREMENT.search(meaning), meaning


@pytest.mark.parametrize("tool", ["", *bench.TOOLS])
def test_help_of_a_benchmark_prints_usage_and_runs_nothing(tool, capsys, monkeypatch):
    """``python -m nmt bench [TOOL] --help``, through the command's dispatch (no tool: the table)."""
    from nmt.bench import main

    module = importlib.import_module(bench.TOOLS.get(tool, "bench.run"))
    started = []
    for name in ("probe", "measure", "compare_ctranslate2", "measure_arrangements", "profile_updates", "matmul_rate"):
        if hasattr(module, name):  # a benchmark that started would call one of these
            monkeypatch.setattr(module, name, lambda *a, name=name, **k: started.append(name))
    with pytest.raises(SystemExit) as stop:
        main([tool, "--help"] if tool else ["--help"])
    assert stop.value.code == 0 and started == []
    assert capsys.readouterr().out.startswith(f"usage: python -m nmt bench {tool}".rstrip() + " [-h]")
