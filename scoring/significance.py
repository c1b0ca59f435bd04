"""The verdict of a table row against its baseline: seeds folded into mean ± std, the seed spread
(pooled over the rows with several seeds), the paired bootstrap over seeds x sentences and the rule
that calls a difference significant."""
from __future__ import annotations

import math
import statistics

from scoring.evaluated import EvaluatedRun
from scoring.metrics import corpus_bleu, seed_bleu_interval, seed_paired_bootstrap_p
from scoring.table_rows import MeanStd


def mean_std(values: list[float], digits: int = 2) -> str:
    """``mean ± sample std`` of per-seed values, or the single value (``MeanStd``'s cell)."""
    return str(MeanStd.of(values, digits))


SIGNIFICANCE = 0.05
BORDERLINE_SE = 3.0  # a verdict whose p lies within this many Monte Carlo standard errors of the level is borderline


def monte_carlo_se(p: float, samples: int, sides: int = 1) -> float:
    """The Monte Carlo standard error of a bootstrap p made of ``samples`` resamples: p is ``sides``
    times a share q of them (two-sided: 2q), so its error is sides x sqrt(q (1 - q) / S), with q at
    least 1/S (a share of none is an estimate too, not an exact 0)."""
    share = min(max(p / sides, 1.0 / samples), 1.0)
    return sides * math.sqrt(share * (1.0 - share) / samples)


def borderline(p: float, error: float) -> bool:
    """Whether a verdict at ``SIGNIFICANCE`` could turn with another draw of the bootstrap: its p
    within ``BORDERLINE_SE`` Monte Carlo standard errors of the level."""
    return abs(p - SIGNIFICANCE) < BORDERLINE_SE * error
BASELINE = "sinusoidal"  # the scheme every row is tested against unless another baseline is given


def pooled_std(groups: list[list[float]]) -> float | None:
    """Pooled standard deviation over the groups of several values (square root of the mean of
    their sample variances); None when no group has several."""
    variances = [statistics.variance(g) for g in groups if len(g) > 1]
    return math.sqrt(statistics.mean(variances)) if variances else None


def seed_summary(runs: list[EvaluatedRun]) -> tuple[float, float, float, float, float, tuple[float, ...]]:
    """A row's seeds on their hypotheses as given (a subset of sentences too): mean BLEU, its 95%
    interval over seeds x sentences, the mean hypothesis/reference length ratio, the mean BLEU
    without brevity penalty, and each seed's BLEU (in the runs' order)."""
    scores = [corpus_bleu(r.hyps, r.refs) for r in runs]
    low, high = seed_bleu_interval([r.hyps for r in runs], runs[0].refs)
    return (statistics.mean(s.value for s in scores), low, high, statistics.mean(s.length_ratio for s in scores),
            statistics.mean(s.without_brevity_penalty for s in scores), tuple(s.value for s in scores))


def seed_spread(groups: list[list[EvaluatedRun]]) -> float | None:
    """Pooled standard deviation of BLEU over seeds, from the groups that have several seeds."""
    return pooled_std([[m.record.bleu for m in g] for g in groups])


def versus_baseline(system: list[list[str]], baseline: list[list[str]], refs: list[str], indices,
                    bleus: tuple[list[float], list[float]], pooled: float | None) -> tuple[float, str]:
    """Two-sided p of a system against the baseline (hypotheses per seed: twice the one-sided
    ``seed_paired_bootstrap_p``, capped at 1 — a table calls differences in both directions, so the
    one-sided p would test each at twice the level) and the verdict: ``bleus`` are the two sides'
    BLEU per seed on ``refs``; the seed spread is their larger seed std, or ``pooled`` when both
    have one seed."""
    p = min(1.0, 2 * seed_paired_bootstrap_p(system, baseline, refs, indices))
    spreads = [statistics.stdev(b) for b in bleus if len(b) > 1]
    delta = statistics.mean(bleus[0]) - statistics.mean(bleus[1])
    return p, verdict(p, delta, max(spreads) if spreads else pooled)


def verdict(p: float, delta: float, spread: float | None) -> str:
    """"yes" when p < 0.05 and the difference of means exceeds the seed spread; with no seed spread
    measured, p alone decides (test-set sampling only, marked so)."""
    if spread is None:
        return "yes (one seed)" if p < SIGNIFICANCE else "no (one seed)"
    return "yes" if p < SIGNIFICANCE and abs(delta) > spread else "no"
