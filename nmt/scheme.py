"""``python -m nmt scheme check NAME [NAME ...] [--only CHECK ...] [KEY=VALUE ...]``: the contract kit
(``contract.kit``) on registered schemes, a line per check — pass, FAIL with the case and its numbers,
or n/a with the reason — and exit 1 when any check fails. ``all`` names every registered scheme;
``KEY=VALUE`` sets the tiny model's config (``model.positional.shaw.max_distance=4``)."""
from __future__ import annotations

import argparse
import time

from contract.kit import CHECKS, run_checks
from models.positional import SCHEMES
from utils.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt scheme", description="Check a positional encoding against "
                                     "the suite's contract.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="run the contract kit on schemes, a line per check",
                               description="Run the contract kit (contract.kit) on registered schemes: padding, "
                                           "cache, beam groups, batching, bf16, shift invariance where the card says "
                                           "relative, gradients, checkpoint, determinism, export, FlexAttention, "
                                           "a 100-update training. Exit 1 when a check fails.")
    check.add_argument("names", nargs="+", metavar="NAME", help="registered scheme names (a+b for a combination), "
                                                                "or all")
    check.add_argument("--only", nargs="+", metavar="CHECK", default=None,
                       help=f"run only these checks ({', '.join(CHECKS)})")
    check.add_argument("overrides", nargs="*", metavar="KEY=VALUE", default=[],
                       help="config overrides of the tiny model (model.positional.shaw.max_distance=4)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    names = [n for n in args.names if "=" not in n]
    overrides = [*(n for n in args.names if "=" in n), *args.overrides, *rest]
    names = list(SCHEMES) if names == ["all"] else names
    unknown = [n for n in names if any(part not in SCHEMES for part in n.split("+"))]
    if unknown:
        raise UserError(f"unknown scheme(s) {', '.join(unknown)} (registered: {', '.join(SCHEMES)})")
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
