"""Claims: a reading's statement that one row beats, trails or matches another, written as a
directive the archive must support, so the report cannot say more than its tests do.

    {{claim STUDY[.first|.second]: A > B [in FAMILY]}}   A is above B
    {{claim STUDY[.first|.second]: A < B [in FAMILY]}}   A is below B
    {{claim STUDY[.first|.second]: A ~ B [in FAMILY]}}   A is not shown to differ from B
    {{claim STUDY[.first|.second]: A = B [in FAMILY]}}   A is equivalent to B within the family's margin

The pair is looked up in the study's declared families (``scoring.families``: the archived
``family_<name>_<test set>.csv``, two-sided paired bootstrap over seeds x sentences, Holm within
the family); ``in FAMILY`` names the family where several hold the pair. Without a test set the
claim must hold on every test set of the study; with one, on that one. A direction holds when the
difference has that sign and the corrected p is below the level; ``~`` holds when the corrected p
is not (it renders the interval of the difference: what the data leave open) — absence of evidence,
not equivalence; ``=`` holds when the family declared an equivalence margin and its Holm-corrected
TOST p is below the level (``scoring.families``). The directive
renders the evidence — difference, interval, p and corrected p — and an unsupported claim is a
one-line ``UserError``, as is one whose verdict is borderline (the corrected p within 3 of its Monte
Carlo standard errors of the level: another draw of the bootstrap may turn it), so ``nmt report``
and ``nmt report --check`` fail naming the reading's file and line. A family declared after its study's first run (``studies.tables.family_standing``)
is exploratory: its claims say so, and the abstract refuses them.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from experiment.run_dir import ArchiveDir
from reporting.sources import STUDIES, TESTSET_NAMES, archived_families, resolve
from scoring.significance import BORDERLINE_SE, SIGNIFICANCE
from studies.catalog import load_studies
from studies.tables import family_standing
from utils.errors import UserError

CLAIM = re.compile(r"claim\s+(?P<study>[\w-]+)(?:\.(?P<which>\w+))?\s*:\s*(?P<a>[\w-]+)\s*(?P<op>[<>~=])\s*"
                   r"(?P<b>[\w-]+)(?:\s+in\s+(?P<family>[\w-]+))?\s*")
SAYS = {">": "above", "<": "below", "~": "not shown to differ from", "=": "equivalent to"}


@dataclass(frozen=True)
class Evidence:
    family: str
    testset: str
    difference: float  # a minus b
    low: float
    high: float
    p: float
    p_holm: float
    margin: float | None = None  # the family's equivalence margin (BLEU), None: it declares none
    p_equivalence_holm: float | None = None  # its Holm-corrected TOST p
    standing: str = ""  # studies.tables.family_standing: "Confirmatory: ..." or "Exploratory: ..." ("" undeclared)
    p_holm_se: float = 0.0  # the Monte Carlo standard error of p_holm
    borderline: bool = False  # p_holm within 3 such errors of the level (scoring.families)
    p_equivalence_holm_se: float | None = None
    equivalence_borderline: bool | None = None

    @property
    def exploratory(self) -> bool:
        return not self.standing.startswith("Confirmatory")


@functools.cache
def _declared() -> dict:
    """The declared studies, read once per process (a report renders dozens of claims)."""
    return load_studies()


def standing(root: Path, study: str, family: str, testset: str) -> str:
    """The family's standing on ``testset`` in the report's study ``study``: read off its declaration
    (and the study's declared test sets) and the start times of the runs archived under ``root``; ""
    where no declared study made the archive."""
    made_by = STUDIES[study].study
    declared = _declared().get(made_by) if made_by else None
    if declared is None:
        return ""
    folder = resolve(root, STUDIES[study].folder)
    return family_standing(declared, family, ArchiveDir(folder).runs() if folder.is_dir() else [], (), [testset])


def evidence(root: Path, study: str, testset: str, a: str, b: str, family: str | None = None) -> Evidence:
    """The test of ``a`` against ``b`` on ``testset`` in the study's families (the sign flipped
    where the family tests ``b`` against ``a``); a pair no family (or several, unnamed) holds is a
    one-line error."""
    holding = []
    for name, rows in archived_families(root, study, testset).items():
        if family is not None and name != family:
            continue
        for test in rows:
            if (test.row, test.baseline) in ((a, b), (b, a)):
                holding.append((name, test))
    if not holding:
        where = f"family '{family}'" if family else "any declared family"
        raise UserError(f"'{a}' vs '{b}' is not tested in {where} of {study} on {testset} (declare it in the "
                        f"study file's families and remake its tables)")
    if len(holding) > 1:
        raise UserError(f"'{a}' vs '{b}' is tested in several families of {study} "
                        f"({', '.join(name for name, _ in holding)}): name one ('in FAMILY')")
    name, test = holding[0]
    sign = 1.0 if test.row == a else -1.0
    low, high = sorted((sign * test.low, sign * test.high))
    return Evidence(name, testset, sign * test.difference, low, high, test.p, test.p_holm, test.margin,
                    test.p_equivalence_holm, standing(root, study, name, testset), test.p_holm_se, test.borderline,
                    test.p_equivalence_holm_se, test.equivalence_borderline)


def supported(op: str, found: Evidence) -> bool:
    """Whether ``found`` supports the direction ``op`` at the level (module doc)."""
    if op == "~":
        return found.p_holm >= SIGNIFICANCE
    if op == "=":
        if found.margin is None:
            raise UserError(f"'=' needs an equivalence margin, and family {found.family} declares none (margin: in the "
                            f"study file, before the runs); '~' says 'not shown to differ'")
        return found.p_equivalence_holm < SIGNIFICANCE
    return found.p_holm < SIGNIFICANCE and (found.difference > 0 if op == ">" else found.difference < 0)


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _both(values: list[str]) -> str:
    """One test set's value, or several joined ("0.003 and 0.020"; "< 0.001 on both" when alike)."""
    if len(values) == 1:
        return values[0]
    return f"{values[0]} on both" if len(set(values)) == 1 else " and ".join(values)


def _tests(found: list[Evidence], op: str) -> str:
    """The p-values a claim shows: the difference's, or for ``=`` the equivalence test's."""
    if op == "=":
        return (f"within ±{found[0].margin:.2f}: TOST Holm p "
                f"{_both([_p(f.p_equivalence_holm) for f in found])}")
    return f"p {_both([_p(f.p) for f in found])}, Holm p {_both([_p(f.p_holm) for f in found])}"


def _shown(found: list[Evidence], op: str) -> str:
    """Each test set's difference with its interval, then the tests: ``+0.52 BLEU [+0.21, +0.83], p ...``
    for one, ``+0.52 [...] and +0.31 [...] BLEU, p ... and ...`` for several."""
    if len(found) == 1:
        return f"{found[0].difference:+.2f} BLEU [{found[0].low:+.2f}, {found[0].high:+.2f}], {_tests(found, op)}"
    return (f"{' and '.join(f'{f.difference:+.2f} [{f.low:+.2f}, {f.high:+.2f}]' for f in found)} BLEU, "
            f"{_tests(found, op)}")


def tested_claim(root: Path, text: str, in_abstract: bool = False) -> tuple[list[Evidence], str]:
    """The evidence of a claim directive's text (``claim STUDY: A > B``) on each test set it names, and
    its operator; an unsupported claim, or an exploratory one ``in_abstract``, is a UserError."""
    match = CLAIM.fullmatch(text)
    if match is None:
        raise UserError(f"a claim reads 'claim STUDY[.first|.second]: A > B' (or <, ~, =), optionally 'in FAMILY'; "
                        f"got '{text}'")
    study, which = match["study"], match["which"]
    if study not in STUDIES:
        raise UserError(f"claim names study '{study}' (known: {', '.join(STUDIES)})")
    if which is not None and which not in TESTSET_NAMES:
        raise UserError(f"claim names test set '{which}' (use {' or '.join(TESTSET_NAMES)})")
    testsets = STUDIES[study].testsets if which is None else (STUDIES[study].testsets[TESTSET_NAMES.index(which)],)
    a, op, b = match["a"], match["op"], match["b"]
    found = [evidence(root, study, testset, a, b, match["family"]) for testset in testsets]
    near = [f for f in found if (f.equivalence_borderline if op == "=" else f.borderline)]
    if near:
        f = near[0]
        p, se = (f.p_equivalence_holm, f.p_equivalence_holm_se) if op == "=" else (f.p_holm, f.p_holm_se)
        raise UserError(f"claim '{a} {op} {b}' of {study} on {f.testset} rests on a borderline verdict: Holm p "
                        f"{p:.4f} ± {se:.4f} (its Monte Carlo standard error) lies within {BORDERLINE_SE:g} of them of "
                        f"{SIGNIFICANCE}, so another draw of the bootstrap may turn it; a borderline verdict supports "
                        f"no claim")
    against = [f for f in found if not supported(op, f)]
    if against:
        f = against[0]
        raise UserError(f"unsupported claim '{a} {op} {b}' ({a} {SAYS[op]} {b}) of {study} on {f.testset}: "
                        f"{_shown([f], op)} in family {f.family} (level {SIGNIFICANCE})")
    if in_abstract and any(f.exploratory for f in found):
        f = next(f for f in found if f.exploratory)
        raise UserError(f"the abstract's claim '{a} {op} {b}' rests on family {f.family} of {study}, which is not "
                        f"confirmatory ({f.standing or 'no declared study'}); the abstract states confirmatory "
                        f"findings only")
    return found, op


def shown_evidence(found: list[Evidence], op: str) -> str:
    """A tested claim's evidence: its test on each test set, then its families (exploratory marked)."""
    families = ", ".join(sorted({f.family + (", exploratory" if f.exploratory else "") for f in found}))
    return f"({_shown(found, op)}; {families})"


def shown_size(found: list[Evidence]) -> str:
    """The size a tested claim carries where it is made, its difference on each test set (``+4.25 BLEU``,
    ``+4.25 and +4.65 BLEU``); its evidence goes in the claims table."""
    return " and ".join(f"{f.difference:+.2f}" for f in found) + " BLEU"


def render_claim(root: Path, text: str, in_abstract: bool = False) -> str:
    """The evidence a claim directive's text (``claim STUDY: A > B``) stands for, e.g. ``(+0.52 BLEU
    [+0.21, +0.83], p < 0.001, Holm p 0.004; papers)`` — on both test sets, in the study's order,
    ``(+0.52 [+0.21, +0.83] and +0.31 [+0.05, +0.60] BLEU, p ... and ..., Holm p ... and ...;
    papers)``, the family marked ``exploratory`` where it was declared after the study's first run
    (``tested_claim`` says what is refused)."""
    return shown_evidence(*tested_claim(root, text, in_abstract))
