"""Comparatives: a reading may compare rows only through a test. A sentence that holds a
comparative word (``COMPARATIVES``) must hold a claim directive (``reporting.claims``) or a value
read off a test (``TESTED_VALUES``: the rows a family finds above or below the baseline, the best
significance group); and the words before each claim must not say the opposite of it: a word of
``ABOVE`` before ``A < B``, of ``BELOW`` before ``A > B``, either before ``A ~ B`` ("not shown to
differ") unless its clause says "not shown", or a word of ``LEVEL`` ("level", "ties", "as good as":
equivalence) before anything but ``=`` (an equivalence test against a declared margin).
Text between ``<!-- quotation: ... -->`` and ``<!-- end of quotation -->`` is another work's own
words and is not read.

``comparative_breaches(text, where)`` lists every breach, each naming ``where`` and the line;
``check_comparatives`` raises the first as a ``UserError``.
"""
from __future__ import annotations

import re

from utils.errors import UserError

ABOVE = ("above", "beats", "beat", "leads", "lead", "better", "ahead", "outperforms", "exceeds", "higher", "recovers",
         "makes up", "lifts")
BELOW = ("below", "trails", "trail", "worse", "behind", "lower", "falls", "loses")
LEVEL = ("level", "ties", "tie", "as good as", "matches", "equal to", "on par")
COMPARATIVES = (*ABOVE, *BELOW, *LEVEL, "best", "worst")
# placeholders whose values are read off a test: a family's verdicts, the best significance group
TESTED_VALUES = re.compile(r"\{\{[\w.-]+\.(?:better|worse|group_a)(?:\.count)?\}\}")
WORD = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in sorted(COMPARATIVES, key=len, reverse=True))
                  + r")(?![\w-])", re.IGNORECASE)  # "word-level" is no comparison
CLAIM = re.compile(r"\{\{claim [^}]*?(?P<op>[<>~=])[^}]*\}\}")
QUOTATION = re.compile(r"<!-- quotation:.*?<!-- end of quotation -->", re.DOTALL)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z{`(*])")
SKIPPED = ("|", "#", "!", "<!--", "- ")  # tables, headings, figures, comments, lists


def _sentences(text: str) -> list[tuple[int, str]]:
    """(line, sentence) of the prose paragraphs of ``text`` (quotations blanked, line breaks kept for counting)."""
    text = QUOTATION.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    found, line = [], 1
    for block in re.split(r"(\n\s*\n)", text):
        if block.strip() and not block.lstrip().startswith(SKIPPED) and not re.fullmatch(r"\s*\{\{[^}]*\}\}\s*", block):
            offset = 0
            for sentence in SENTENCE_END.split(block):
                start = block.index(sentence, offset)
                found.append((line + block[:start].count("\n"), sentence.replace("\n", " ")))
                offset = start + len(sentence)
        line += block.count("\n")
    return found


def _contradiction(sentence: str) -> str | None:
    """The first claim whose words (those of its clause since the last claim) say the opposite of it, as a message."""
    start = 0
    for claim in CLAIM.finditer(sentence):
        clause = re.split(r"[;:—]", re.sub(r"\{\{[^}]*\}\}", " ", sentence[start:claim.start()]))[-1]
        words = [w.lower() for w in WORD.findall(clause)]
        op = claim["op"]
        if words:
            last = words[-1]
            unsaid = "not shown" in clause.lower()  # "ahead there, not shown to differ here", "not shown to beat"
            wrong = ((last in ABOVE and op == "<") or (last in BELOW and op == ">") or (last in LEVEL and op != "=")
                     or (op == "~" and last in (*ABOVE, *BELOW) and not unsaid))
            if wrong:
                needs = "an equivalence test ('=', a family with a margin)" if last in LEVEL else f"'{op}'"
                return f"'{last}' before {claim.group(0)} says what the claim does not ({needs})"
        start = claim.end()
    return None


def comparative_breaches(text: str, where: str) -> list[str]:
    """Every sentence that compares without a test, or whose words contradict its claim (module doc),
    as ``WHERE:LINE: reason: sentence`` lines, in order."""
    found = []
    for line, sentence in _sentences(text):
        bare = re.sub(r"\{\{[^}]*\}\}", " ", sentence)
        word = WORD.search(bare)
        if word and not CLAIM.search(sentence) and not TESTED_VALUES.search(sentence):
            found.append(f"{where}:{line}: '{word.group(1)}' compares without a claim directive (write "
                         f"{{{{claim STUDY: A > B}}}} or rephrase): {sentence.strip()[:120]}")
        wrong = _contradiction(sentence)
        if wrong:
            found.append(f"{where}:{line}: {wrong}: {sentence.strip()[:120]}")
    return found


def check_comparatives(text: str, where: str) -> None:
    """A ``UserError`` naming ``where`` and the line of the first breach (``comparative_breaches``)."""
    found = comparative_breaches(text, where)
    if found:
        raise UserError(found[0])
