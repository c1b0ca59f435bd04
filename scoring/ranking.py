"""Whether two comparisons rank the schemes alike: Kendall's rank correlation and the gaps.

Two studies that differ in one thing (the training budget, say) each give every scheme a mean test
BLEU over its seeds; ``compare_rankings`` puts the schemes both hold side by side (rank, BLEU, gap to
the baseline in each, and how the gap moved) and states Kendall's tau-b with its two-sided p-value.
Needs no model: it reads the evaluated runs as the comparison table does (``load_evaluated``).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scoring.evaluated import evaluated_rows
from scoring.loaded import LoadedRun, as_loaded
from scoring.table_text import markdown_table
from utils.errors import UserError

EXACT_UP_TO = 50  # schemes; above this (or with ties) the p-value is the normal approximation


@dataclass(frozen=True)
class KendallTau:
    """tau-b in [-1, 1], its two-sided p-value under independence, and how the p was computed."""

    tau: float
    p: float
    method: str  # "exact" (no ties: the permutation distribution) or "normal" (tie-corrected variance)


def _inversion_counts(n: int) -> list[int]:
    """How many permutations of n items have k inversions, k = 0 .. n(n-1)/2 (Mahonian numbers)."""
    counts = [1]
    for m in range(2, n + 1):  # inserting the m-th item adds 0 .. m-1 inversions
        longer = [0] * (len(counts) + m - 1)
        for k, c in enumerate(counts):
            for extra in range(m):
                longer[k + extra] += c
        counts = longer
    return counts


def kendall_tau(x: list[float], y: list[float]) -> KendallTau:
    """Kendall's tau-b of paired observations and its two-sided p-value.

    tau-b = (C - D) / sqrt((n0 - tx) (n0 - ty)) over the n0 = n(n-1)/2 pairs (C concordant, D
    discordant, tx / ty pairs tied in x / y). Without ties the p-value is exact: the share of the n!
    orders whose |C - D| is at least the observed one; with ties, the normal approximation of
    C - D with the tie-corrected variance (Kendall 1970, the formula scipy uses).
    """
    n = len(x)
    if n != len(y) or n < 2:
        raise UserError(f"Kendall's tau needs two equally long lists of at least 2 values (got {len(x)} and {len(y)})")
    concordant = discordant = tied_x = tied_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            tied_x += dx == 0
            tied_y += dy == 0
            if dx * dy > 0:
                concordant += 1
            elif dx * dy < 0:
                discordant += 1
    pairs = n * (n - 1) // 2
    if tied_x == pairs or tied_y == pairs:
        raise UserError("Kendall's tau is undefined when one ranking ties every item")
    s = concordant - discordant
    tau = s / math.sqrt((pairs - tied_x) * (pairs - tied_y))
    if tied_x == 0 and tied_y == 0 and n <= EXACT_UP_TO:
        counts = _inversion_counts(n)
        fewest = min(discordant, pairs - discordant)  # the distribution of D is symmetric about pairs/2
        p = min(1.0, 2 * sum(counts[: fewest + 1]) / math.factorial(n))
        return KendallTau(tau, p, "exact")
    ties_x, ties_y = _tie_groups(x), _tie_groups(y)
    v0 = n * (n - 1) * (2 * n + 5)
    vx = sum(t * (t - 1) * (2 * t + 5) for t in ties_x)
    vy = sum(u * (u - 1) * (2 * u + 5) for u in ties_y)
    v1 = sum(t * (t - 1) for t in ties_x) * sum(u * (u - 1) for u in ties_y)
    v2 = sum(t * (t - 1) * (t - 2) for t in ties_x) * sum(u * (u - 1) * (u - 2) for u in ties_y)
    variance = (v0 - vx - vy) / 18 + v1 / (2 * n * (n - 1))
    if n > 2:
        variance += v2 / (9 * n * (n - 1) * (n - 2))
    p = math.erfc(abs(s) / math.sqrt(2 * variance))
    return KendallTau(tau, min(1.0, p), "normal")


def _tie_groups(values: list[float]) -> list[int]:
    """The sizes of the groups of equal values (groups of one included; they add nothing)."""
    sizes: dict[float, int] = {}
    for v in values:
        sizes[v] = sizes.get(v, 0) + 1
    return list(sizes.values())


def scheme_bleu(runs: Sequence[LoadedRun | Path], testset: str) -> dict[str, float]:
    """Each scheme's mean test BLEU over its runs (seeds) on ``testset``."""
    bleus: dict[str, list[float]] = {}
    for run in evaluated_rows(as_loaded(runs), testset):
        bleus.setdefault(run.row_scheme, []).append(run.record.bleu)
    return {scheme: statistics.fmean(values) for scheme, values in bleus.items()}


def _ranks(bleu: dict[str, float]) -> dict[str, int]:
    order = sorted(bleu, key=lambda s: -bleu[s])
    return {scheme: order.index(scheme) + 1 for scheme in bleu}


def compare_rankings(first: dict[str, float], second: dict[str, float], names: tuple[str, str],
                     baseline: str = "sinusoidal") -> str:
    """A Markdown table of the schemes both comparisons hold (``first`` / ``second``: scheme -> mean
    BLEU; ``names``: what each is called in the header), ordered by the second: rank, BLEU and gap
    to ``baseline`` in each, the gap's change; then Kendall's tau-b between the two orders (undefined, and said
    so, where one comparison gives every scheme the same BLEU)."""
    shared = [s for s in second if s in first]
    if len(shared) < 2:
        raise UserError(f"the two comparisons share {len(shared)} scheme(s); a rank correlation needs at least 2")
    if baseline not in shared:
        raise UserError(f"the baseline '{baseline}' is not in both comparisons (shared: {', '.join(shared)})")
    a = {s: first[s] for s in shared}
    b = {s: second[s] for s in shared}
    rank_a, rank_b = _ranks(a), _ranks(b)
    tied = [name for name, bleu in zip(names, (a, b), strict=True) if len(set(bleu.values())) == 1]
    header = ["scheme", f"rank ({names[0]})", f"BLEU ({names[0]})", f"vs {baseline}", f"rank ({names[1]})",
              f"BLEU ({names[1]})", f"vs {baseline}", "gap change"]
    lines = markdown_table(header, [])
    for s in sorted(shared, key=lambda s: rank_b[s]):
        gap_a, gap_b = a[s] - a[baseline], b[s] - b[baseline]
        change = "—" if s == baseline else f"{gap_b - gap_a:+.2f}"
        lines.append(f"| {s} | {rank_a[s]} | {a[s]:.2f} | {gap_a:+.2f} | {rank_b[s]} | {b[s]:.2f} | {gap_b:+.2f} | {change} |")
    if tied:  # no order to correlate (e.g. every scheme at BLEU 0 after too short a training)
        correlation = (f"Kendall's tau-b between the two orders of these {len(shared)} schemes: undefined, every scheme "
                       f"has the same BLEU in {' and in '.join(tied)}.")
    else:
        result = kendall_tau([a[s] for s in shared], [b[s] for s in shared])
        method = "exact permutation distribution" if result.method == "exact" else "normal approximation, tie-corrected"
        correlation = (f"Kendall's tau-b between the two orders of these {len(shared)} schemes: {result.tau:.3f}, "
                       f"two-sided p = {result.p:.2g} ({method}).")
    lines += [
        "",
        f"{correlation} "
        f"BLEU: each scheme's mean over its seeds; gap: BLEU minus {baseline}'s in the same comparison; "
        f"gap change: the second comparison's gap minus the first's.",
    ]
    return "\n".join(lines) + "\n"
