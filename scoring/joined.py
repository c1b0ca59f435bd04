"""BLEU against k for test sets of k consecutive sentences joined (``data.concatenated``): per row
and k, the mean BLEU over seeds with its 95% interval over seeds x sentences, the mean
hypothesis/reference length ratio, the mean BLEU without brevity penalty and each seed's BLEU, archived as ``joined_<split>.csv`` and drawn as
``joined_<split>.png`` (``analysis.pictures.by_group_size``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from data.concatenated import concatenated_name
from scoring.groups import table_rows
from scoring.loaded import LoadedRun, as_loaded
from scoring.significance import seed_summary
from scoring.table_text import csv_text

HEADER = ["scheme", "k", "segments", "seeds", "bleu", "low", "high", "length_ratio", "bleu_without_bp", "seed_bleus"]


@dataclass(frozen=True)
class JoinedPoint:
    """One row at one k: segments scored, seeds, mean BLEU, its interval, mean length ratio, mean BLEU
    without brevity penalty, each seed's BLEU."""

    k: int
    segments: int
    seeds: int
    bleu: float
    low: float
    high: float
    length_ratio: float
    bleu_without_bp: float
    seed_bleus: tuple[float, ...]


def joined_points(run_dirs: Sequence[LoadedRun | Path], split: str, ks: list[int],
                  labels: dict[Path, str] | None = None) -> dict[str, list[JoinedPoint]]:
    """Each row's points at k = 1 (the split itself) and each of ``ks``, in increasing k."""
    points: dict[str, list[JoinedPoint]] = {}
    loaded = as_loaded(run_dirs)
    for k in sorted({1, *ks}):
        for label, runs in table_rows(loaded, concatenated_name(split, k), labels).items():
            points.setdefault(label, []).append(JoinedPoint(k, len(runs[0].refs), len(runs), *seed_summary(runs)))
    return points


def joined_csv(points: dict[str, list[JoinedPoint]]) -> str:
    """``HEADER`` and one line per row and k (rows by name)."""
    return csv_text([HEADER, *([label, p.k, p.segments, p.seeds, f"{p.bleu:.2f}", f"{p.low:.2f}", f"{p.high:.2f}",
                                f"{p.length_ratio:.3f}", f"{p.bleu_without_bp:.2f}",
                                ";".join(f"{b:.2f}" for b in p.seed_bleus)]
                               for label in sorted(points) for p in points[label])], lineterminator="\n")
