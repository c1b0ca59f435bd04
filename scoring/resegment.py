"""A hypothesis of k sentences joined, split back onto its k references (the method of
mwerSegmenter, Matusov et al. 2005, used in speech-translation evaluation): the k consecutive
word segments whose summed word-level edit distance to the references is smallest. It lets the
length study score each position inside a joined input apart (``scoring.positions``): does a model
lose the second half of a long input, or all of it evenly?

One dynamic programme over the hypothesis and the references in order, O(k · H · R) for H
hypothesis words and R words a reference: the edit-distance table of reference j starts, at every
hypothesis position, from the best cost of the first j - 1 references ending there. Ties go to the
earliest segment ending latest (a hypothesis word that fits both segments equally stays in the
earlier one), so the result is deterministic.
"""
from __future__ import annotations

from collections.abc import Sequence

INF = float("inf")


def resegment(hypothesis: str, references: Sequence[str]) -> list[str]:
    """``hypothesis``'s words as ``len(references)`` consecutive segments (each joined by one space,
    possibly empty) with the least summed word edit distance to ``references`` in order."""
    if not references:
        raise ValueError("no references to segment onto")
    hyp = hypothesis.split()
    size = len(hyp)
    best = [0.0] + [INF] * size  # the first j references against hyp[:i], for j = 0
    starts: list[list[int]] = []  # per reference: where its segment starts on the best path ending at i
    for reference in references:
        ref = reference.split()
        # cost[i][p]: the references before, then ref[:p] against hyp[:i]; start[i][p]: where this segment began
        cost = [[INF] * (len(ref) + 1) for _ in range(size + 1)]
        start = [[0] * (len(ref) + 1) for _ in range(size + 1)]
        for i in range(size + 1):
            if i == 0 or best[i] <= cost[i - 1][0] + 1:  # the segment begins here
                cost[i][0], start[i][0] = best[i], i
            else:  # hyp[i - 1] inserted at the segment's start
                cost[i][0], start[i][0] = cost[i - 1][0] + 1, start[i - 1][0]
            for p in range(1, len(ref) + 1):
                options = [(cost[i][p - 1] + 1, start[i][p - 1])]  # ref[p - 1] deleted
                if i > 0:
                    options.insert(0, (cost[i - 1][p - 1] + (hyp[i - 1] != ref[p - 1]), start[i - 1][p - 1]))
                    options.append((cost[i - 1][p] + 1, start[i - 1][p]))  # hyp[i - 1] inserted
                cost[i][p], start[i][p] = min(options, key=lambda option: option[0])
        best = [row[-1] for row in cost]
        starts.append([row[-1] for row in start])
    segments, end = [], size
    for j in range(len(references) - 1, -1, -1):
        begin = starts[j][end]
        segments.append(" ".join(hyp[begin:end]))
        end = begin
    return segments[::-1]

