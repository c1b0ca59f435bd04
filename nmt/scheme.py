"""``python -m nmt scheme``: bring your own positional encoding.

- ``check NAME|FILE [...] [--only CHECK ...] [KEY=VALUE ...]``: the contract kit (``contract.kit``) on
  registered schemes or on the schemes a plugin file declares, a line per check — pass, FAIL with the
  case and its numbers, or n/a with the reason — and exit 1 when any check fails. ``all`` names every
  built-in scheme; ``KEY=VALUE`` sets the tiny model's config (``model.positional.shaw.max_distance=4``).
- ``new NAME [--kind bias|rotary|embedding] [--dir DIR]``: a plugin file to fill in, its test, and a
  study of it against sinusoidal and RoPE (``contract.scaffold``); the scheme keeps the contract as written.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from contract.kit import CHECKS, run_checks
from contract.scaffold import KINDS, write_scheme
from models.positional import SCHEMES, builtin_schemes, plugins, scheme_parts
from utils.cli import with_examples
from utils.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt scheme", description="Bring your own positional encoding: "
                                     "check one against the suite's contract, or start one from a template.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="run the contract kit on schemes, a line per check",
                               description="Run the contract kit (contract.kit) on registered schemes or a plugin "
                                           "file's: padding, cache, beam groups, batching, bf16, shift invariance "
                                           "where the card says relative, gradients, checkpoint, determinism, "
                                           "export, FlexAttention, a 100-update training. Exit 1 when a check fails.")
    check.add_argument("names", nargs="+", metavar="NAME|FILE", help="registered scheme names (a+b for a "
                       "combination), all (the built-ins), or plugin files (every scheme each declares)")
    check.add_argument("--only", nargs="+", metavar="CHECK", default=None,
                       help=f"run only these checks ({', '.join(CHECKS)})")
    check.add_argument("overrides", nargs="*", metavar="KEY=VALUE", default=[],
                       help="config overrides of the tiny model (model.positional.shaw.max_distance=4)")
    new = actions.add_parser("new", help="write a plugin scheme to fill in, and its test",
                             description="Write DIR/NAME.py (a scheme of the kind asked for: card, options, the hook "
                                         "with its shapes, a neutral default body), DIR/test_NAME.py (the contract "
                                         "kit on it; both pass as written) and DIR/NAME-study.yaml (NAME against "
                                         "sinusoidal and RoPE on the grammar, 3 seeds, its family declared now).")
    new.add_argument("name", metavar="NAME", help="the scheme's name (lowercase letters, digits, _)")
    new.add_argument("--kind", choices=KINDS, default="bias", help="where it acts: a logit bias (default), a "
                     "rotation of queries and keys, or an addition to the embeddings")
    new.add_argument("--dir", type=Path, default=Path("."), help="where to write the three files (default: here)")
    return with_examples(parser, "python -m nmt scheme check rope",
                         "python -m nmt scheme new mybias --kind bias")


def schemes_named(names: list[str]) -> list[str]:
    """The schemes the command line names: ``all`` (the built-ins), registered names, plugin files
    (loaded: each one's schemes)."""
    found: list[str] = []
    for name in names:
        if name == "all":
            found += builtin_schemes()
        elif name.endswith(".py") or Path(name).is_file():
            found += plugins.load_file(name)
        else:
            missing = [part for part in scheme_parts(name) if part not in SCHEMES]
            if missing:
                plugins.load_installed(missing)
            missing = [part for part in scheme_parts(name) if part not in SCHEMES]
            if missing:
                raise UserError(f"unknown scheme(s) {', '.join(missing)} (registered: {', '.join(SCHEMES)}; a plugin is "
                                "named by its file, e.g. my_pe.py)")
            found.append(name)
    return found


def check(args: argparse.Namespace, rest: list[str]) -> int:
    names = schemes_named([n for n in args.names if "=" not in n])
    overrides = [*(n for n in args.names if "=" in n), *args.overrides, *rest]
    failed = 0
    for name in names:
        start = time.perf_counter()
        outcomes = run_checks(name, tuple(overrides), args.only)
        bad = sum(o.passed is False for o in outcomes)
        print(f"== {name}: {len(outcomes) - bad} of {len(outcomes)} checks hold "
              f"({sum(o.passed is None for o in outcomes)} n/a), {time.perf_counter() - start:.1f} s", flush=True)
        for outcome in outcomes:
            print(f"   {outcome.line()}", flush=True)
        failed += bad > 0
    if len(names) > 1:
        print(f"{len(names) - failed} of {len(names)} schemes keep the contract")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.action == "new":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        scheme, test, study = write_scheme(args.name, args.kind, args.dir)
        print(f"wrote {scheme}, {test} and {study}; next: python -m nmt scheme check {scheme}, then "
              f"python -m nmt study {study}")
        return 0
    return check(args, rest)
