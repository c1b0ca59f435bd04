"""The metric columns of a comparison table: each is one function (hypotheses, references -> a
corpus score) and one line of ``METRICS``. A table computes its columns from the hypotheses and
references its runs archived (DIR/eval/<test set>/), so a metric added here reaches every archive
without retraining or re-decoding anything.

BLEU is not among them: it is the table's own column, with its interval and the paired test.
A study's tables (all seeds, the first seed, the rankings) score the same runs several times: they
share one ``MetricScores``, which makes each (metric, hypotheses, references) once and, around the
tables, keeps them in a file beside them (``scores_kept_in``, ``metric_scores.json``): TER, chrF and
chrF++ of a thousand sentences take about a second a run in sacreBLEU's Python, most of remaking an
archive's tables, and the file makes them once per version of the texts and metric.
"""
from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sacrebleu.metrics import CHRF, TER

from scoring.metrics import corpus_chrf, nltk_bleu4, texts_digest
from utils.errors import UserError
from utils.io import atomic_write_text


@dataclass(frozen=True)
class TableMetric:
    header: str  # the column's title
    score: Callable[[list[str], list[str]], float]  # (hypotheses, references) -> corpus score
    meaning: str  # what the table's footnote says of it
    version: str  # what a stored score must have been made by (the signature of its settings and package)


def _signature(metric) -> str:
    """sacreBLEU's signature of ``metric``'s settings (it is known once the metric has scored)."""
    metric.corpus_score(["a"], [["a"]])
    return str(metric.get_signature())


def _chrf_plus_plus(hypotheses: list[str], references: list[str]) -> float:
    return CHRF(word_order=2).corpus_score(hypotheses, [references]).score


def _ter(hypotheses: list[str], references: list[str]) -> float:
    return TER().corpus_score(hypotheses, [references]).score


_CHRF, _CHRF_PP, _TER = _signature(CHRF()), _signature(CHRF(word_order=2)), _signature(TER())
METRICS = {
    "chrf": TableMetric("chrF", lambda h, r: corpus_chrf(h, r).value, f"sacreBLEU's chrF (`{_CHRF}`)", _CHRF),
    "bleu4-nltk": TableMetric("BLEU-4 (nltk)", nltk_bleu4, "NLTK's corpus BLEU-4 on sacreBLEU's 13a tokens",
                              f"nltk {importlib.metadata.version('nltk')}, 13a tokens"),
    "chrf++": TableMetric("chrF++", _chrf_plus_plus, f"chrF with word bigrams (Popović 2017; `{_CHRF_PP}`)",
                          _CHRF_PP),
    "ter": TableMetric("TER", _ter, f"translation edit rate, lower is better (`{_TER}`)", _TER),
}
DEFAULT_METRICS = ["chrf", "bleu4-nltk", "chrf++", "ter"]

def check_metrics(names: list[str]) -> list[str]:
    """``names`` if each is a registered metric, else a one-line error naming the known ones."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise UserError(f"unknown metric '{unknown[0]}' (known: {', '.join(METRICS)})")
    return list(names)


STORE = "metric_scores.json"  # beside a study's tables: the scores they used (``scores_kept_in``)


class MetricScores:
    """The metric scores of one set of tables: each made once per (metric, texts: SHA-256 of hypotheses
    and references), or taken from those kept beside the tables (``kept``); ``used`` holds the keys the
    tables read."""

    def __init__(self, kept: dict[tuple[str, str], float] | None = None):
        self._scores = dict(kept or {})
        self.kept = set(self._scores)
        self.used: set[tuple[str, str]] = set()

    def score(self, name: str, hypotheses: list[str], references: list[str]) -> float:
        """The corpus score of metric ``name``."""
        key = (name, texts_digest(hypotheses, references))
        if key not in self._scores:
            self._scores[key] = float(METRICS[name].score(hypotheses, references))
        self.used.add(key)
        return self._scores[key]

    def store(self, keys: list[tuple[str, str]]) -> str:
        """The JSON of the scores of ``keys``: per metric, its version and each digest's score, sorted."""
        tree = {name: {"version": METRICS[name].version,
                       "scores": {digest: self._scores[(name, digest)] for metric, digest in keys if metric == name}}
                for name in sorted({metric for metric, _ in keys})}
        return json.dumps(tree, indent=1, sort_keys=True) + "\n"


def _read_store(path: Path) -> dict:
    """The scores stored in ``path`` that are still valid (metric known, same version); a file that
    is not a store is one line, then made anew."""
    try:
        tree = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        return {(name, digest): float(score) for name, block in tree.items()
                if name in METRICS and block["version"] == METRICS[name].version
                for digest, score in block["scores"].items()}
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        print(f"{path}: not a store of metric scores ({type(err).__name__}); its scores are made again", flush=True)
        return {}


@contextmanager
def scores_kept_in(path: Path) -> Iterator[MetricScores]:
    """The metric scores of a study's tables, reused from ``path`` and written back to it around them
    (JSON: per metric, its version and each scored pair's digest -> score). A score is reused only for
    the same texts (SHA-256 of hypotheses and references) under the same version (sacreBLEU's
    signature, NLTK's version); the file is then rewritten (atomically, sorted) with exactly the
    scores the tables used, so it neither grows stale nor holds a score no table shows. Tables that
    fail or are interrupted (Ctrl-C) keep the work done: the file then holds its valid scores and
    every score made since, and the next remake that completes prunes it."""
    scores = MetricScores(_read_store(path))
    completed = False
    try:
        yield scores
        completed = True
    finally:
        keys = sorted(scores.used) if completed else sorted(scores.kept | scores.used)
        atomic_write_text(path, scores.store(keys))
