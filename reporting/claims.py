"""Claims: a reading's statement that one row beats, trails or matches another, written as a
directive the archive must support, so the report cannot say more than its tests do.

    {{claim STUDY[.first|.second]: A > B [in FAMILY][, STANDING]}}   A is above B
    {{claim STUDY[.first|.second]: A < B [in FAMILY][, STANDING]}}   A is below B
    {{claim STUDY[.first|.second]: A ~ B [in FAMILY][, STANDING]}}   A is not shown to differ from B
    {{claim STUDY[.first|.second]: A = B [in FAMILY][, STANDING]}}   A is equivalent to B within the family's margin

The directive renders the whole comparative clause (``clause``): subject, the verb the test's
outcome gives, object, the test set where one is named, then the size, the standing and the claim's
number — "RoPE is above sinusoidal (+4.25 and +4.65 BLEU; confirmatory, Claim 1)"; ``{{Claim ...}}``
capitalises it to open a sentence. In an interaction family (a row's gap to the baseline here minus
its gap in another study) the clause says how the gap moves between the two studies. ``STANDING``
(``confirmatory`` or ``exploratory``), where written, must be the family's; the abstract and the
conclusion state an exploratory claim only so written.

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
and ``nmt report --check`` fail naming the reading's file and line. A family declared after its study's
first run (``studies.standing.family_standing``) is exploratory: its claims say so.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from experiment.run_dir import ArchiveDir
from models.positional import SCHEMES
from reporting.sources import DECLARED, STUDIES, TESTSET_NAMES, archived_families, interaction_of, resolve
from scoring.significance import BORDERLINE_SE, SIGNIFICANCE
from studies.standing import family_standing
from utils.errors import UserError

CLAIM = re.compile(r"[cC]laim\s+(?P<study>[\w-]+)(?:\.(?P<which>\w+))?\s*:\s*(?P<a>[\w+-]+)\s*(?P<op>[<>~=])\s*"
                   r"(?P<b>[\w+-]+)(?:\s+in\s+(?P<family>[\w-]+))?(?:\s*,\s*(?P<standing>confirmatory|exploratory))?\s*")
STANDINGS = ("confirmatory", "exploratory")
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
    standing: str = ""  # studies.standing.family_standing: "Confirmatory: ..." or "Exploratory: ..." ("" undeclared)
    p_holm_se: float = 0.0  # the Monte Carlo standard error of p_holm
    borderline: bool = False  # p_holm within 3 such errors of the level (scoring.families)
    p_equivalence_holm_se: float | None = None
    equivalence_borderline: bool | None = None
    interaction: str | None = None  # an interaction family's other declared study (its gaps there); None: none

    @property
    def exploratory(self) -> bool:
        return not self.standing.startswith("Confirmatory")


def standing(root: Path, study: str, family: str, testset: str) -> str:
    """The family's standing on ``testset`` in the report's study ``study``: read off its declaration
    (and the study's declared test sets) and the start times of the runs archived under ``root``; ""
    where no declared study made the archive."""
    made_by = STUDIES[study].study
    declared = DECLARED.get(made_by) if made_by else None
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
        if (family is not None and name != family) or (family is None and interaction_of(study, name) is not None):
            continue  # an interaction family's pair is claimed by naming it: its difference is a change of gaps
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
                    test.p_equivalence_holm_se, test.equivalence_borderline, interaction_of(study, name))


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
    its operator; an unsupported claim, one whose written standing is not its family's, or an
    exploratory one ``in_abstract`` not written as such, is a UserError."""
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
    exploratory = any(f.exploratory for f in found)
    said = match["standing"]
    if said is not None and said != STANDINGS[exploratory]:
        f = next((f for f in found if f.exploratory), found[0])
        raise UserError(f"claim '{a} {op} {b}' of {study} says {said}, but family {f.family} is "
                        f"{STANDINGS[exploratory]} ({f.standing or 'no declared study'})")
    if in_abstract and exploratory and said is None:
        f = next(f for f in found if f.exploratory)
        raise UserError(f"the abstract's (or conclusion's) claim '{a} {op} {b}' rests on family {f.family} of {study}, "
                        f"which is not confirmatory ({f.standing or 'no declared study'}): state it as one, "
                        f"'{{{{claim ... , exploratory}}}}', or leave it to the results")
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


# how prose names a study's evaluation variant of a row (``polar+pi``: "PoPE with position interpolation")
VARIANT_TITLES = {"oracle": "decoded to the reference's length", "logn": "with log-n scaling",
                  "pi": "with position interpolation", "ntk": "with NTK scaling", "yarn": "with YaRN"}


def row_title(label: str) -> str:
    """How prose names a row: its scheme's card title (``RoPE``), a variant's row as its row's title and the
    variant (``polar+pi``: "PoPE with position interpolation"), else the label in code font."""
    head, _, variant = label.rpartition("+")
    if head and variant in VARIANT_TITLES:
        return f"{row_title(head)} {VARIANT_TITLES[variant]}"
    scheme = SCHEMES.get(label)
    return scheme.card.title if scheme is not None and scheme.card.title else f"`{label}`"


def _is(title: str) -> str:
    """The verb's number: "are" after a plural title (its last word a lowercase plural: "positions")."""
    last = title.split()[-1]
    return "are" if last.islower() and last.endswith("s") and not last.endswith("ss") else "is"


def _possessive(title: str) -> str:
    """``RoPE's``; ``T5's buckets'`` after a plural."""
    return title + ("'" if _is(title) == "are" else "'s")


def _called(declared: str) -> str:
    """How prose names a declared study: the report's name for the archive it made, else its name in code font."""
    return next((s.called for s in STUDIES.values() if s.study == declared and s.called), f"`{declared}`")


def clause(text: str, found: list[Evidence], op: str) -> str:
    """The comparative clause a tested claim renders (module doc), without its parenthesis: subject,
    the verb of the test's outcome, object and, where the directive names one, the test set."""
    match = CLAIM.fullmatch(text)
    a, b = row_title(match["a"]), row_title(match["b"])
    where = f" on the {match['which']} test set" if match["which"] else ""
    other = found[0].interaction
    if other is not None:  # a difference in differences: how a's gap to b moves from the other study to this one
        here, there = _called(STUDIES[match["study"]].study or ""), _called(other)
        moves = {">": f"rises from {there} to {here}", "<": f"falls from {there} to {here}",
                 "~": f"is not shown to move from {there} to {here}",
                 "=": f"stays, within ±{found[0].margin or 0:.2f} BLEU, from {there} to {here}"}[op]
        return f"{_possessive(a)} difference from {b}{where} {moves}"
    verb = f"equivalent, within ±{found[0].margin or 0:.2f} BLEU, to" if op == "=" else SAYS[op]
    return f"{a} {_is(a)} {verb} {b}{where}"


def render_clause(root: Path, text: str, number: Callable[[str, str], int],
                  in_abstract: bool = False) -> tuple[str, str]:
    """A claim directive's text as the report shows it where it is made — its clause, then its size,
    standing and number: "RoPE is above sinusoidal (+4.25 BLEU; confirmatory, Claim 1)" (capitalised
    when the directive is written ``Claim``) — and its evidence for the claims table. ``number``:
    ``(key, evidence) -> int``, the claim's number in the report."""
    found, op = tested_claim(root, text, in_abstract)
    evidence = shown_evidence(found, op)
    said = clause(text, found, op)
    if text.startswith("Claim") and said.split()[0].islower():  # "Learned absolute ...", but "p-RoPE" as named
        said = said[0].upper() + said[1:]
    standing = STANDINGS[any(f.exploratory for f in found)]
    return f"{said} ({shown_size(found)}; {standing}, Claim {number(text, evidence)})", evidence
