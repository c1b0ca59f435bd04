"""Test sentences grouped by source length, the test sets pooled: per bucket (``16-20``, ``21-``:
whitespace words, bounds included, open-ended with a trailing dash) each row's BLEU and length ratio
(mean over seeds) with the bucket's sentence count, and the study's families tested within each
bucket — each (family, bucket) corrected by Holm on its own, as a family per bucket.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import replace
from pathlib import Path

from data.parallel_text import read_lines
from experiment.run_dir import RunDir
from scoring.arithmetic import arithmetic_note
from scoring.evaluated import EvaluatedRun
from scoring.families import family_markdown, relabel, tested_family
from scoring.groups import table_rows
from scoring.metrics import corpus_bleu
from utils.errors import UserError
from utils.io import atomic_write_text

Bucket = tuple[int, int | None]


def parse_bucket(text: str) -> Bucket:
    """``16-20`` -> (16, 20), ``21-`` -> (21, None); anything else is a one-line error."""
    found = re.fullmatch(r"(\d+)-(\d*)", text.strip())
    if not found or (found.group(2) and int(found.group(2)) < int(found.group(1))):
        raise UserError(f"a length bucket reads LOW-HIGH or LOW- (words, bounds included), got '{text}'")
    return int(found.group(1)), int(found.group(2)) if found.group(2) else None


def bucket_name(bucket: Bucket) -> str:
    return f"{bucket[0]}-{'' if bucket[1] is None else bucket[1]}"


def pooled_rows(run_dirs: list[Path], testsets: list[str],
                labels: dict[Path, str] | None = None) -> tuple[dict[str, list[EvaluatedRun]], list[str]]:
    """The table's rows with each run's hypotheses and references of ``testsets`` joined in that
    order, and the joined sources (the first run's; every run must have been given the same)."""
    pooled: dict[str, list[EvaluatedRun]] = {}
    sources: list[str] = []
    for number, testset in enumerate(testsets):
        rows = table_rows(run_dirs, testset)
        if labels is not None:
            rows = relabel(rows, labels)
        for label, runs in rows.items():
            for i, run in enumerate(sorted(runs, key=lambda r: r.seed)):
                if number == 0:
                    pooled.setdefault(label, []).append(run)
                else:
                    before = pooled[label][i]
                    pooled[label][i] = replace(before, hyps=before.hyps + run.hyps, refs=before.refs + run.refs)
        first = next(iter(rows.values()))[0]
        sources += read_lines(RunDir(first.run_dir).evaluation(testset).sources)
    return pooled, sources


def in_bucket(rows: dict[str, list[EvaluatedRun]], sources: list[str], bucket: Bucket) -> dict[str, list[EvaluatedRun]]:
    """``rows`` cut to the sentences whose source length (words) lies in ``bucket``."""
    lo, hi = bucket
    keep = [i for i, s in enumerate(sources) if lo <= len(s.split()) and (hi is None or len(s.split()) <= hi)]
    if not keep:
        raise UserError(f"no test sentence has a source of {bucket_name(bucket)} words")
    return {label: [replace(r, hyps=[r.hyps[i] for i in keep], refs=[r.refs[i] for i in keep]) for r in runs]
            for label, runs in rows.items()}


def write_bucket_tables(run_dirs: list[Path], testsets: list[str], buckets: list[str], families: dict,
                        folder: Path, allow_mixed_arithmetic: bool = False,
                        labels: dict[Path, str] | None = None) -> list[Path]:
    """``buckets_<test sets>.md`` (each row's BLEU and length ratio per bucket, mean over seeds) and
    for each family and bucket ``family_<name>_words_<bucket>.md`` (+ CSV) under ``folder``."""
    rows, sources = pooled_rows(run_dirs, testsets, labels)
    arithmetic = arithmetic_note({label: [r.run_dir for r in runs] for label, runs in rows.items()},
                                 allow_mixed_arithmetic)
    parsed = [parse_bucket(b) for b in buckets]
    cut = {bucket: in_bucket(rows, sources, bucket) for bucket in parsed}
    head = ["scheme", "seeds", *(f"{bucket_name(b)} ({len(next(iter(cut[b].values()))[0].refs)})" for b in parsed)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    for label in sorted(rows):
        cells = []
        for bucket in parsed:
            scores = [corpus_bleu(r.hyps, r.refs) for r in cut[bucket][label]]
            cells.append(f"{statistics.mean(s.value for s in scores):.2f} "
                         f"(×{statistics.mean(s.length_ratio for s in scores):.2f})")
        lines.append("| " + " | ".join([label, str(len(rows[label])), *cells]) + " |")
    lines += ["", f"Test sets {', '.join(f'`{t}`' for t in testsets)} pooled; per source-length bucket (words, "
                  f"sentences in brackets): sacreBLEU, mean over seeds, and (×) the hypothesis/reference length "
                  f"ratio. {arithmetic}"]
    made = [atomic_write_text(Path(folder) / f"buckets_{'_'.join(testsets)}.md", "\n".join(lines) + "\n")]
    for name, pairs in families.items():
        for bucket in parsed:
            where = f"source length {bucket_name(bucket)} words of {' + '.join(testsets)}"
            markdown, table_csv = family_markdown(tested_family(cut[bucket], list(pairs)), where, name, arithmetic)
            out = Path(folder) / f"family_{name}_words_{bucket_name(bucket)}.md"
            made += [atomic_write_text(out, markdown), atomic_write_text(out.with_suffix(".csv"), table_csv)]
    return made
