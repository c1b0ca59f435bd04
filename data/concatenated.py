"""Long inputs made from short ones: ``k`` consecutive test sentences joined into one segment
(Varis and Bojar 2021's protocol), so a model trained on short sentences meets inputs k times as
long whose references are known — the k references joined the same way.

Groups are consecutive and start at the first sentence; the last ``n mod k`` sentences, too few
for a group, are left out (every segment holds exactly k sentences, so a BLEU at k compares like
with like). k = 1 is the test set itself. Built from the test files when a run is evaluated
(``nmt test --concat K``), never stored apart from the evaluation it feeds.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from utils.errors import UserError


def concatenate(sources: Sequence[str], targets: Sequence[str], k: int) -> tuple[list[str], list[str]]:
    """The ``k``-sentence segments of a parallel test set: source i is sentences ik .. ik+k-1 of
    ``sources`` joined by a space (their surrounding whitespace stripped), target i the same
    sentences of ``targets``; the last ``len(sources) % k`` pairs are left out."""
    if k < 1:
        raise UserError(f"--concat needs group sizes of at least 1, got {k}")
    if len(sources) != len(targets):
        raise UserError(f"{len(sources)} sources but {len(targets)} references: cannot group them")
    groups = len(sources) // k
    if groups == 0:
        raise UserError(f"{len(sources)} sentences make no group of {k}")

    def joined(side: Sequence[str]) -> list[str]:
        return [" ".join(s.strip() for s in side[i * k:(i + 1) * k]) for i in range(groups)]

    return joined(sources), joined(targets)


def concatenated_name(testset: str, k: int) -> str:
    """The test-set name of ``testset``'s k-sentence segments (``test_2016_flickr_concat8``; k = 1 is the set itself)."""
    return testset if k == 1 else f"{testset}_concat{k}"


def group_size(testset: str) -> int:
    """k of a test-set name ``concatenated_name`` made (1 for a plain set)."""
    found = re.search(r"_concat(\d+)$", testset)
    return int(found.group(1)) if found else 1


def base_testset(testset: str) -> str:
    """The plain test set a name ``concatenated_name`` made was built from (the name itself for a plain set)."""
    return re.sub(r"_concat\d+$", "", testset)
