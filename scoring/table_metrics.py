"""The metric columns of a comparison table: each is one function (hypotheses, references -> a
corpus score) and one line of ``METRICS``. A table computes its columns from the hypotheses and
references its runs archived (DIR/eval/<test set>/), so a metric added here reaches every archive
without retraining or re-decoding anything.

BLEU is not among them: it is the table's own column, with its interval and the paired test.
Scores are memoized per (metric, hypotheses, references) for the life of the process: a study's
tables (all seeds, the first seed, the rankings) read the same runs several times.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from sacrebleu.metrics import CHRF, TER

from scoring.metrics import corpus_chrf, nltk_bleu4
from utils.errors import UserError


@dataclass(frozen=True)
class TableMetric:
    header: str  # the column's title
    score: Callable[[list[str], list[str]], float]  # (hypotheses, references) -> corpus score
    meaning: str  # what the table's footnote says of it


def _signature(metric) -> str:
    """sacreBLEU's signature of ``metric``'s settings (it is known once the metric has scored)."""
    metric.corpus_score(["a"], [["a"]])
    return str(metric.get_signature())


def _chrf_plus_plus(hypotheses: list[str], references: list[str]) -> float:
    return CHRF(word_order=2).corpus_score(hypotheses, [references]).score


def _ter(hypotheses: list[str], references: list[str]) -> float:
    return TER().corpus_score(hypotheses, [references]).score


METRICS = {
    "chrf": TableMetric("chrF", lambda h, r: corpus_chrf(h, r).value,
                        f"sacreBLEU's chrF (`{_signature(CHRF())}`)"),
    "bleu4-nltk": TableMetric("BLEU-4 (nltk)", nltk_bleu4, "NLTK's corpus BLEU-4 on sacreBLEU's 13a tokens"),
    "chrf++": TableMetric("chrF++", _chrf_plus_plus,
                          f"chrF with word bigrams (Popović 2017; `{_signature(CHRF(word_order=2))}`)"),
    "ter": TableMetric("TER", _ter, f"translation edit rate, lower is better (`{_signature(TER())}`)"),
}
DEFAULT_METRICS = ["chrf", "bleu4-nltk", "chrf++", "ter"]

_scores: dict[tuple[str, str], float] = {}


def check_metrics(names: list[str]) -> list[str]:
    """``names`` if each is a registered metric, else a one-line error naming the known ones."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise UserError(f"unknown metric '{unknown[0]}' (known: {', '.join(METRICS)})")
    return list(names)


def metric_score(name: str, hypotheses: list[str], references: list[str]) -> float:
    """The corpus score of metric ``name`` (memoized, module doc)."""
    digest = hashlib.sha256("\0".join(["\n".join(hypotheses), "\n".join(references)]).encode()).hexdigest()
    key = (name, digest)
    if key not in _scores:
        _scores[key] = float(METRICS[name].score(hypotheses, references))
    return _scores[key]
