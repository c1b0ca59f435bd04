"""Claims: a reading's statement that one row beats, trails or matches another, written as a
directive the archive must support, so the report cannot say more than its tests do.

    {{claim STUDY[.first|.second]: A > B [in FAMILY]}}   A is above B
    {{claim STUDY[.first|.second]: A < B [in FAMILY]}}   A is below B
    {{claim STUDY[.first|.second]: A ~ B [in FAMILY]}}   no difference shown between A and B

The pair is looked up in the study's declared families (``scoring.families``: the archived
``family_<name>_<test set>.csv``, two-sided paired bootstrap over seeds x sentences, Holm within
the family); ``in FAMILY`` names the family where several hold the pair. Without a test set the
claim must hold on every test set of the study; with one, on that one. A direction holds when the
difference has that sign and the corrected p is below the level; ``~`` holds when the corrected p
is not (it renders the interval of the difference: what the data leave open). The directive
renders the evidence — difference, interval, p and corrected p — and an unsupported claim is a
one-line ``UserError``, so ``nmt report`` and ``nmt report --check`` fail naming the reading's
file and line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from reporting.sources import STUDIES, TESTSET_NAMES, archived_families
from scoring.significance import SIGNIFICANCE
from utils.errors import UserError

CLAIM = re.compile(r"claim\s+(?P<study>[\w-]+)(?:\.(?P<which>\w+))?\s*:\s*(?P<a>[\w-]+)\s*(?P<op>[<>~])\s*"
                   r"(?P<b>[\w-]+)(?:\s+in\s+(?P<family>[\w-]+))?\s*")
SAYS = {">": "above", "<": "below", "~": "level with"}


@dataclass(frozen=True)
class Evidence:
    family: str
    testset: str
    difference: float  # a minus b
    low: float
    high: float
    p: float
    p_holm: float


def evidence(root: Path, study: str, testset: str, a: str, b: str, family: str | None = None) -> Evidence:
    """The test of ``a`` against ``b`` on ``testset`` in the study's families (the sign flipped
    where the family tests ``b`` against ``a``); a pair no family (or several, unnamed) holds is a
    one-line error."""
    holding = []
    for name, rows in archived_families(root, study, testset).items():
        if family is not None and name != family:
            continue
        for row in rows:
            if (row["row"], row["baseline"]) in ((a, b), (b, a)):
                holding.append((name, row))
    if not holding:
        where = f"family '{family}'" if family else "any declared family"
        raise UserError(f"'{a}' vs '{b}' is not tested in {where} of {study} on {testset} (declare it in the "
                        f"study file's families and remake its tables)")
    if len(holding) > 1:
        raise UserError(f"'{a}' vs '{b}' is tested in several families of {study} "
                        f"({', '.join(name for name, _ in holding)}): name one ('in FAMILY')")
    name, row = holding[0]
    sign = 1.0 if row["row"] == a else -1.0
    low, high = sorted((sign * float(row["low"]), sign * float(row["high"])))
    return Evidence(name, testset, sign * float(row["difference"]), low, high, float(row["p"]), float(row["p_holm"]))


def supported(op: str, found: Evidence) -> bool:
    """Whether ``found`` supports the direction ``op`` at the level (module doc)."""
    if op == "~":
        return found.p_holm >= SIGNIFICANCE
    return found.p_holm < SIGNIFICANCE and (found.difference > 0 if op == ">" else found.difference < 0)


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _shown(found: Evidence) -> str:
    return (f"{found.difference:+.2f} BLEU [{found.low:+.2f}, {found.high:+.2f}], p {_p(found.p)}, "
            f"Holm p {_p(found.p_holm)}")


def render_claim(root: Path, text: str) -> str:
    """The evidence a claim directive's text (``claim STUDY: A > B``) stands for, e.g. ``(+0.52 BLEU
    [+0.21, +0.83], p < 0.001, Holm p 0.004; papers)`` — on both test sets, in the study's order,
    ``(+0.52 [+0.21, +0.83] and +0.31 [+0.05, +0.60] BLEU, p ... and ..., Holm p ... and ...;
    papers)``; an unsupported claim is a UserError."""
    match = CLAIM.fullmatch(text)
    if match is None:
        raise UserError(f"a claim reads 'claim STUDY[.first|.second]: A > B' (or <, ~), optionally 'in FAMILY'; "
                        f"got '{text}'")
    study, which = match["study"], match["which"]
    if study not in STUDIES:
        raise UserError(f"claim names study '{study}' (known: {', '.join(STUDIES)})")
    if which is not None and which not in TESTSET_NAMES:
        raise UserError(f"claim names test set '{which}' (use {' or '.join(TESTSET_NAMES)})")
    testsets = STUDIES[study].testsets if which is None else (STUDIES[study].testsets[TESTSET_NAMES.index(which)],)
    a, op, b = match["a"], match["op"], match["b"]
    found = [evidence(root, study, testset, a, b, match["family"]) for testset in testsets]
    against = [f for f in found if not supported(op, f)]
    if against:
        f = against[0]
        raise UserError(f"unsupported claim '{a} {op} {b}' ({a} {SAYS[op]} {b}) of {study} on {f.testset}: "
                        f"{_shown(f)} in family {f.family} (level {SIGNIFICANCE})")
    families = ", ".join(sorted({f.family for f in found}))
    if len(found) == 1:
        return f"({_shown(found[0])}; {families})"
    def both(values: list[str]) -> str:
        return f"{values[0]} on both" if len(set(values)) == 1 else " and ".join(values)

    return (f"({' and '.join(f'{f.difference:+.2f} [{f.low:+.2f}, {f.high:+.2f}]' for f in found)} BLEU, "
            f"p {both([_p(f.p) for f in found])}, Holm p {both([_p(f.p_holm) for f in found])}; {families})")
