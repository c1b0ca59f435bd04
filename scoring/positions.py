"""BLEU by position inside joined inputs: each hypothesis of a ``<split>_concat<k>`` test set split
back onto its k references (``scoring.resegment``), position 1..k scored apart over all segments
(sacreBLEU corpus BLEU, each seed apart, then the mean over seeds), archived as
``positions_<split>.csv`` and drawn as ``positions_<split>.png`` (``analysis.pictures.by_position``).
Where a model trained on single sentences fails on k of them, this says whether it loses the later
sentences (the end of the input) or all of them evenly.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from data.concatenated import concatenated_name
from scoring.groups import table_rows
from scoring.loaded import LoadedRun, as_loaded
from scoring.metrics import corpus_bleu
from scoring.resegment import resegment
from scoring.table_text import csv_text

HEADER = ["scheme", "k", "position", "sentences", "seeds", "bleu", "seed_bleus"]


@dataclass(frozen=True)
class PositionPoint:
    """One row, one k, one position: sentences scored, seeds, mean BLEU over seeds and each seed's."""

    k: int
    position: int
    sentences: int
    seeds: int
    bleu: float
    seed_bleus: tuple[float, ...]


def position_scores(hypotheses: list[str], references: list[str], k: int) -> list[float]:
    """BLEU of positions 1..k of joined hypotheses (hypothesis i joins sentences ik .. ik+k-1 of
    ``references``, the plain test set's), each hypothesis re-segmented onto its k references."""
    segments = [resegment(h, references[i * k:(i + 1) * k]) for i, h in enumerate(hypotheses)]
    return [corpus_bleu([s[p] for s in segments], [references[i * k + p] for i in range(len(segments))]).value
            for p in range(k)]


def position_points(run_dirs: Sequence[LoadedRun | Path], split: str, ks: list[int],
                    labels: dict[Path, str] | None = None) -> dict[str, list[PositionPoint]]:
    """Each row's points for every k > 1 of ``ks`` and every position, in increasing k then position."""
    points: dict[str, list[PositionPoint]] = {}
    loaded = as_loaded(run_dirs)
    for k in sorted(k for k in set(ks) if k > 1):
        for label, runs in table_rows(loaded, concatenated_name(split, k), labels).items():
            per_seed = [position_scores(run.hyps, run.run.evaluation(split).references, k) for run in runs]
            points.setdefault(label, []).extend(
                PositionPoint(k, p + 1, len(runs[0].hyps), len(runs), statistics.fmean(s[p] for s in per_seed),
                              tuple(s[p] for s in per_seed)) for p in range(k))
    return points


def positions_csv(points: dict[str, list[PositionPoint]]) -> str:
    """``HEADER`` and one line per row, k and position (rows by name; seeds' BLEU joined by ';')."""
    return csv_text([HEADER, *([label, p.k, p.position, p.sentences, p.seeds, f"{p.bleu:.2f}",
                                ";".join(f"{b:.2f}" for b in p.seed_bleus)]
                               for label in sorted(points) for p in points[label])], lineterminator="\n")
