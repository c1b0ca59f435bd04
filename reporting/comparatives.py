"""The prose guard: a reading compares rows only through a test, and says no number of its own.

A claim directive (``reporting.claims``) renders the whole comparative clause — subject, the verb
of the test's outcome, object, size, standing — so the words around it need not, and may not, add
to it. For each sentence of a reading's prose (paragraphs and list items; tables, headings, figures,
comments and ``<!-- quotation: ... -->`` ... ``<!-- end of quotation -->`` blocks, another work's
own words, are not read):

- **numbers**: a digit outside a placeholder is refused (every number comes from the archive through
  a placeholder), and so is a number spelt in words next to a metric ("two BLEU points", "half a
  point");
- **a sentence holding a claim** names no scheme outside its directives but the ones they compare,
  shows no value of its own (placeholders other than claims, citations, references and names), and
  holds no comparison word outside its directives;
- **a sentence about results without a claim** (it names a scheme, or schemes, encodings, rows,
  gaps, results, findings) holds no comparison word and no verb of evidence (confirms, shows, finds,
  holds, replicates, supports, in any inflection), unless it holds a value read off a test
  (``TESTED_VALUES``: the rows a family finds above or below the baseline, the best group, a family's
  count of significant hypotheses).

Comparison words are found by form, not from a list of synonyms: any word ending in -er or -est
(but the words of that shape that compare nothing, ``NOT_COMPARATIVE``, and those of time,
``OF_TIME``: newer, earlier), more/less/most/least/fewer (not "at least", "at most"), "as X as",
words of equivalence and similarity (equivalent, same, similar, comparable, identical, equal,
indistinguishable, on par, match, tie), and the verbs and prepositions of ranking (above, below,
ahead, behind, beat, lead, trail, lag, outperform, exceed, surpass, win, lose, gain, differ, ...),
negated or not: "does not lead" is a comparison the test must make.

``comparative_breaches(text, where)`` lists every breach as ``WHERE:LINE: reason: sentence``;
``check_comparatives`` raises the first as a ``UserError``.
"""
from __future__ import annotations

import re

from models.positional import SCHEMES
from reporting.sources import STUDIES
from utils.errors import UserError

# words of the -er/-est shape that compare nothing (checked against the readings' vocabulary)
NOT_COMPARATIVE = frozenset(
    "after another answer banner border buffer character chapter cluster computer consider corner counter cover "
    "decoder deliver either encoder enter ever filter folder further gather header holder however hyper interest "
    "layer letter manifest master matter member misorder never number offer optimizer order other over paper "
    "parameter per pointer power printer rather register remember render rest scheduler summer test together tokenizer "
    "transformer trigger under user whether wonder writer reader speaker player worker honest modest request "
    "suggest digest contest protest forest west quest".split())
OF_TIME = frozenset("earlier earliest later latest newer newest older oldest sooner".split())
RANKING = (r"above|below|ahead|behind|beats?|beaten|beating|leads?|leading|led|trails?|trailed|trailing|lags?|lagged|"
           r"lagging|outperform\w*|exceed\w*|surpass\w*|wins?|winning|won|loses?|losing|lost|gains?|gained|gaining|"
           r"superior|inferior|prefer\w*|improve\w*|hurts?|helps?|helped|lifts?|lifted|recover\w*|drops?|dropped|"
           r"falls?|fell|differ|differs|differed|differing|different|advantage\w*|edge|tops?|last|first-rate|"
           r"equivalen\w*|same|similar\w*|comparabl\w*|identical\w*|equal\w*|indistinguishabl\w*|on par|par with|"
           r"match\w*|ties?|tied|level with")
COMPARISON = re.compile(
    r"(?<![\w`-])(?:(?P<form>[a-z]{2,}(?:er|est))|(?P<degree>(?<!at )(?:more|less|most|least|fewer))|"
    r"(?P<as>as (?!well |soon |long |far |much as )\w+ as)|(?P<ranking>" + RANKING + r"))(?![\w`-])", re.IGNORECASE)
EVIDENCE = re.compile(r"(?<![\w-])(?:confirm(?:s|ed|ing)?|shows?|showed|showing|finds?|found|holds?|holding|held|"
                      r"replicat\w+|support(?:s|ed|ing)?)(?![\w-])", re.IGNORECASE)
NUMBER_WORDS = (r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|twenty|thirty|forty|"
                r"fifty|sixty|seventy|eighty|ninety|hundred|thousand|half|quarter|dozen|a few|several|a couple of)"
                r"(?:-\w+)?")  # "ninety-five" too
METRIC = r"BLEU|chrF\+*|TER|points?|per ?cent|percent|%"
SPELT = re.compile(rf"(?<![\w-])(?:{NUMBER_WORDS})(?:\s+\S+){{0,2}}?\s+(?:{METRIC})(?![\w-])|"
                   rf"(?<![\w-])(?:{METRIC})(?:\s+\S+){{0,1}}?\s+(?:{NUMBER_WORDS})(?![\w-])", re.IGNORECASE)
GENERIC = re.compile(r"(?<![\w-])(?:schemes?|encodings?|rows?|gaps?|results?|findings?)(?![\w-])", re.IGNORECASE)
# placeholders whose values are read off a test: a family's verdicts, the best significance group
TESTED_VALUES = re.compile(r"\{\{[\w.-]+\.(?:(?:better|worse|group_a)(?:\.count)?|"
                           r"family\.[\w-]+\.(?:significant|above|below)(?:\.rows)?)\}\}")
CLAIM = re.compile(r"\{\{[cC]laim [^}]*?:\s*(?P<a>[\w+-]+)\s*[<>~=]\s*(?P<b>[\w+-]+)[^}]*\}\}")
WORDLESS = re.compile(r"\{\{(?:[cC]laim|cite|ref|name\.)[^}]*\}\}")  # placeholders that show no value
PLACEHOLDER = re.compile(r"\{\{[^}]*\}\}")
# a value read off a study's results (not its setup: folder, runs, hours, config, ...)
RESULT = re.compile(r"\{\{(?:" + "|".join(STUDIES) + r")\.[\w.-]*?\b(?:bleu|rank|better|worse|group|group_a|count|p|"
                    r"tau|shift|spread|different|total|top|bottom|significant|above|below|rows)\}\}")
STANDING = re.compile(r"\b(?:confirmatory|exploratory)\b", re.IGNORECASE)
QUOTATION = re.compile(r"<!-- quotation:.*?<!-- end of quotation -->", re.DOTALL)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z{`(*])")
SKIPPED = ("|", "#", "!", "<!--")  # tables, headings, figures, comments


def _mentions() -> list[tuple[re.Pattern, str]]:
    """How prose names each registered scheme — its card's title, the title's first word where that is a
    name (RoPE, Transformer-XL), its registered name in code font — with the scheme each pattern means."""
    found = []
    for name, scheme in SCHEMES.items():
        forms = {f"`{name}`"}
        if scheme.card.title:
            forms.add(scheme.card.title)
            first = re.split(r"[\s']", scheme.card.title)[0]
            if first != first.lower() or len(scheme.card.title.split()) == 1:
                forms.add(first)
        for form in forms:
            found.append((re.compile(r"(?<![\w-])" + re.escape(form) + r"(?![\w-])"), name))
    found.append((re.compile(r"\{\{name\.buckets\}\}"), "t5"))
    return found


MENTIONS = _mentions()


def _named(text: str) -> set[str]:
    """The schemes ``text`` names."""
    return {name for pattern, name in MENTIONS if pattern.search(text)}


def _paragraphs(text: str) -> list[tuple[int, str]]:
    """(line, block) of the prose of ``text``: paragraphs and list items (quotations blanked, line
    breaks kept for counting)."""
    text = QUOTATION.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    found, line = [], 1
    for block in re.split(r"(\n\s*\n|\n(?=\s*- ))", text):
        prose = block.strip()
        if prose and not prose.startswith(SKIPPED) and not re.fullmatch(r"\{\{[^}]*\}\}", prose):
            found.append((line, block))
        line += block.count("\n")
    return found


def _sentences(block: str) -> list[tuple[int, str]]:
    """(line within ``block``, counted from 0; sentence) of a prose block."""
    found, offset = [], 0
    for sentence in SENTENCE_END.split(block):
        start = block.index(sentence, offset)
        found.append((block[:start].count("\n"), re.sub(r"^\s*- ", "", sentence.replace("\n", " "))))
        offset = start + len(sentence)
    return found


def _unstated(block: str) -> bool:
    """Whether ``block`` is a results paragraph (a reading, or one showing a value read off a study's
    results) that says neither confirmatory nor exploratory (a claim directive says it for it)."""
    results = block.lstrip().startswith("**Reading") or RESULT.search(block)
    return bool(results) and not CLAIM.search(block) and not STANDING.search(PLACEHOLDER.sub(" ", block))


def _comparison(text: str) -> str | None:
    """The first comparison word of ``text`` (module doc), or None."""
    for match in COMPARISON.finditer(text):
        word = match.group(0).lower()
        if match["form"] and (word in NOT_COMPARATIVE or word in OF_TIME):
            continue
        return match.group(0)
    return None


def _sentence_breaches(sentence: str) -> list[str]:
    """The reasons ``sentence`` breaks the guard (module doc)."""
    found = []
    outside = PLACEHOLDER.sub(lambda m: " {{name.buckets}} " if m.group(0) == "{{name.buckets}}" else " ", sentence)
    digit = re.search(r"\d[\d.,]*", outside)
    if digit:
        found.append(f"the number '{digit.group(0)}' is written in the reading (every number comes from a "
                     f"placeholder)")
    spelt = SPELT.search(re.sub(r"`[^`]*`", " ", outside))
    if spelt:
        found.append(f"'{spelt.group(0)}' spells a number next to a metric (every number comes from a placeholder)")
    claims = list(CLAIM.finditer(sentence))
    prose = re.sub(r"`[^`]*`", " ", outside)  # code spans name things, they say nothing
    word = _comparison(prose)
    if claims:
        compared = {name for claim in claims for name in (claim["a"], claim["b"])}
        others = sorted(_named(outside) - compared)
        if others:
            found.append(f"a sentence holding a claim names no other scheme outside it (here: {', '.join(others)}); "
                         f"give that one its own sentence")
        values = [m.group(0) for m in PLACEHOLDER.finditer(sentence) if not WORDLESS.fullmatch(m.group(0))]
        if values:
            found.append(f"a sentence holding a claim shows no other number ({values[0]}); give it its own sentence")
        if word:
            found.append(f"'{word}' outside the claim: the claim renders the comparison's words (subject, verb "
                         f"from the test's outcome, object), so the sentence adds none")
        return found
    about_results = _named(outside) or GENERIC.search(outside)
    if about_results and not TESTED_VALUES.search(sentence):
        if word:
            found.append(f"'{word}' compares without a claim directive (write {{{{claim STUDY: A > B}}}}, which "
                         f"renders the comparison, or rephrase)")
        evidence = EVIDENCE.search(prose)
        if evidence:
            found.append(f"'{evidence.group(0)}' states evidence about results without a claim directive")
    return found


def comparative_breaches(text: str, where: str) -> list[str]:
    """Every breach of the guard in ``text`` (module doc), as ``WHERE:LINE: reason: sentence`` lines, in order."""
    found = []
    for line, block in _paragraphs(text):
        if _unstated(block):
            found.append(f"{where}:{line}: a results paragraph says whether it is confirmatory or exploratory: "
                         f"{' '.join(block.split())[:120]}")
        found += [f"{where}:{line + offset}: {reason}: {sentence.strip()[:120]}"
                  for offset, sentence in _sentences(block) for reason in _sentence_breaches(sentence)]
    return found


def check_comparatives(text: str, where: str) -> None:
    """A ``UserError`` naming ``where`` and the line of the first breach (``comparative_breaches``)."""
    found = comparative_breaches(text, where)
    if found:
        raise UserError(found[0])
