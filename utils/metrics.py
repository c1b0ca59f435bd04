"""Translation quality with sacreBLEU: every score carries its signature."""
from __future__ import annotations

from dataclasses import dataclass

import sacrebleu


@dataclass
class Score:
    value: float  # 0-100
    signature: str


def corpus_bleu(hypotheses: list[str], references: list[str]) -> Score:
    """sacreBLEU corpus BLEU on detokenized text (13a tokenization, exp smoothing)."""
    metric = sacrebleu.metrics.BLEU()
    result = metric.corpus_score(hypotheses, [references])
    return Score(result.score, str(metric.get_signature()))


def corpus_chrf(hypotheses: list[str], references: list[str]) -> Score:
    metric = sacrebleu.metrics.CHRF()
    result = metric.corpus_score(hypotheses, [references])
    return Score(result.score, str(metric.get_signature()))
