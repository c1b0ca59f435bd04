"""The reference pages in docs/ that are generated from the code (``python -m nmt docs``) match it,
and say what the code knows: every config key with its meaning, type, default and rules; every
scheme; every command's options."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import typing

import pytest

import bench
from experiment.config import Config
from models.positional import SCHEMES
from nmt import docs
from nmt.__main__ import COMMANDS
from tests.conftest import ROOT
from utils.errors import UserError


def test_the_committed_pages_match_the_code():
    assert docs.stale_pages(ROOT / "docs") == [], "run: python -m nmt docs"


def test_a_page_that_drifted_is_named(tmp_path):
    docs.main(["--out", str(tmp_path)])
    (tmp_path / "configs.md").write_text((tmp_path / "configs.md").read_text().replace("at least 1", "at least 2"))
    with pytest.raises(UserError, match="configs.md"):
        docs.main(["--check", "--out", str(tmp_path)])


def config_fields(cls, prefix=""):
    """(key, field, type) of every field of the sections, walked here without the generator's help."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            yield from config_fields(hints[f.name], f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f, hints[f.name]


def test_every_config_key_is_a_row_with_its_default_rules_and_a_meaning():
    page = (ROOT / "docs" / "configs.md").read_text(encoding="utf-8")
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ") for line in page.splitlines()
            if line.startswith("| `")}
    keys = list(config_fields(Config))
    assert len(keys) > 60
    for key, f, hint in keys:
        assert key in rows, key
        _, type_name, default, allowed, meaning = rows[key]
        assert meaning.strip(" |"), f"{key}: no meaning (a comment on its line in the dataclass)"
        if typing.get_origin(hint) is typing.Literal:
            assert all(f"`{choice}`" in allowed for choice in typing.get_args(hint)), key
        if f.default is not dataclasses.MISSING and isinstance(f.default, (int, float)) and f.default is not True:
            assert repr(f.default) in default, key
    # a rule checked in __post_init__ is shown beside its key
    assert "at least 8" in rows["tokenizer.vocab_size"][3] and "in [0, 1)" in rows["model.dropout"][3]
    for name, scheme in SCHEMES.items():  # each scheme's own options
        if getattr(scheme, "Options", None):
            for f in dataclasses.fields(scheme.Options):
                assert f"model.positional.{name}.{f.name}" in rows, (name, f.name)


def test_every_scheme_and_every_option_of_every_command_is_on_its_page():
    schemes = (ROOT / "docs" / "schemes.md").read_text(encoding="utf-8")
    for name, scheme in SCHEMES.items():
        assert f"| `{name}` | {scheme.card.summary} |" in schemes
    commands = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    parsers = [importlib.import_module(module).build_parser() for module in COMMANDS.values()]
    parsers += [importlib.import_module(module).build_parser() for module in bench.TOOLS.values()]
    while parsers:
        parser = parsers.pop()
        assert f"## `{parser.prog}`" in commands, parser.prog
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers += list(action.choices.values())  # subcommands
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in commands, (parser.prog, option)


def test_no_page_holds_a_path_of_one_machine():
    """The docs, README and ARCHITECTURE.md name files relative to the checkout: an absolute path of
    the machine a page was written on (/work/..., /home/..., /tmp/...) means nothing on the reader's."""
    import re

    absolute = re.compile(r"(?:^|[\s(`'\"=:])/(?:work|home|Users|root|mnt|tmp|opt|srv|scratch)/[\w.-]")
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "ARCHITECTURE.md"]
    found = [f"{page.name}:{number}" for page in pages
             for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1) if absolute.search(line)]
    assert found == []


def test_the_parameter_table_counts_every_registered_scheme():
    page = (ROOT / "docs" / "schemes.md").read_text(encoding="utf-8")
    table = page.split("## Parameters", 1)[1]
    assert all(f"`{name}`" in table for name in SCHEMES)
