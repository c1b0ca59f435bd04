"""The verdict of a table row against its baseline: seeds folded into mean ± std, the seed spread
(pooled over the rows with several seeds), the paired bootstrap over seeds x sentences and the rule
that calls a difference significant."""
from __future__ import annotations

import math
import statistics

from scoring.evaluated import EvaluatedRun
from scoring.metrics import Draws, Scored, seed_interval, seed_paired_p
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


def borderline_count(flags: list[bool]) -> str:
    """" (2 verdicts borderline)" for the verdicts that are ("" for none), a caption's count."""
    count = sum(bool(f) for f in flags)
    return f" ({count} {'verdict' if count == 1 else 'verdicts'} borderline)" if count else ""


def borderline_tally(flags: list[bool]) -> str:
    """"Marked borderline: 2 of the 15 verdicts." — an uncorrected table's count ("" without verdicts)."""
    return f"Marked borderline: {sum(bool(f) for f in flags)} of the {len(flags)} verdicts." if flags else ""


def monte_carlo_note(what: str, corrected: bool = False) -> str:
    """A caption's sentence on the Monte Carlo standard error of its p-values (``what``: the column),
    the same in every table that shows one; ``corrected``: Holm-corrected p-values, which alone decide
    their verdicts (an uncorrected table's verdict also asks for a difference beyond the seed spread)."""
    if corrected:
        return (f"{what}: the corrected p's Monte Carlo standard error (a two-sided p of S resamples, 2 x a share q: "
                f"2 sqrt(q(1 - q)/S), times Holm's multiplier); a verdict within {BORDERLINE_SE:g} of them of "
                f"{SIGNIFICANCE} is borderline: another draw of the bootstrap may turn it.")
    return (f"{what}: p's Monte Carlo standard error (a two-sided p of S resamples, 2 x a share q: 2 sqrt(q(1 - q)/S)); "
            f"a verdict that p decides and that lies within {BORDERLINE_SE:g} of them of {SIGNIFICANCE} is marked "
            f"borderline: another draw of the bootstrap may turn it.")


def pooled_std(groups: list[list[float]]) -> float | None:
    """Pooled standard deviation over the groups of several values (square root of the mean of
    their sample variances); None when no group has several."""
    variances = [statistics.variance(g) for g in groups if len(g) > 1]
    return math.sqrt(statistics.mean(variances)) if variances else None


def seed_summary(runs: list[EvaluatedRun]) -> tuple[float, float, float, float, float, tuple[float, ...]]:
    """A row's seeds on their hypotheses as given (a subset of sentences too): mean BLEU, its 95%
    interval over seeds x sentences, the mean hypothesis/reference length ratio, the mean BLEU
    without brevity penalty, and each seed's BLEU (in the runs' order)."""
    scores = [r.scored.bleu for r in runs]
    low, high = seed_interval([r.scored for r in runs], Draws(len(runs[0].refs)))
    return (statistics.mean(s.value for s in scores), low, high, statistics.mean(s.length_ratio for s in scores),
            statistics.mean(s.without_brevity_penalty for s in scores), tuple(s.value for s in scores))


def seed_spread(groups: list[list[EvaluatedRun]]) -> float | None:
    """Pooled standard deviation of BLEU over seeds, from the groups that have several seeds."""
    return pooled_std([[m.record.bleu for m in g] for g in groups])


def versus_baseline(system: list[Scored], baseline: list[Scored], draws: Draws,
                    bleus: tuple[list[float], list[float]], pooled: float | None) -> tuple[float, float, str]:
    """Two-sided p of a system against the baseline (a scored run per seed: twice the one-sided
    ``seed_paired_p``, capped at 1 — a table calls differences in both directions, so the one-sided p
    would test each at twice the level), its Monte Carlo standard error over the ``draws``' samples,
    and the verdict: ``bleus`` are the two sides' BLEU per seed; the seed spread is their larger seed
    std, or ``pooled`` when both have one seed."""
    p = min(1.0, 2 * seed_paired_p(system, baseline, draws))
    error = monte_carlo_se(p, draws.samples, sides=2)
    spreads = [statistics.stdev(b) for b in bleus if len(b) > 1]
    delta = statistics.mean(bleus[0]) - statistics.mean(bleus[1])
    return p, error, verdict(p, delta, max(spreads) if spreads else pooled, error)


def verdict(p: float, delta: float, spread: float | None, error: float = 0.0) -> str:
    """"yes" when p < 0.05 and the difference of means exceeds the seed spread; with no seed spread
    measured, p alone decides (test-set sampling only, marked "one seed"). Where p decides (no spread,
    or a difference beyond it) and lies within 3 of its Monte Carlo standard errors ``error`` of the
    level, the verdict is marked "borderline": "yes (borderline)", "no (one seed, borderline)"."""
    decided_by_p = spread is None or abs(delta) > spread
    marks = (["one seed"] if spread is None else []) + (["borderline"] if decided_by_p and borderline(p, error) else [])
    said = "yes" if p < SIGNIFICANCE and decided_by_p else "no"
    return said + (f" ({', '.join(marks)})" if marks else "")
