"""Test sentences grouped by source length, the test sets pooled: per bucket (``16-20``, ``21-``:
whitespace words, bounds included, open-ended with a trailing dash) each row's BLEU with its 95%
interval over seeds x sentences, chrF and hypothesis/reference length ratio (means over seeds), with
the bucket's sentence count; and the study's families tested within each bucket — each (family,
bucket) corrected by Holm on its own, as a family per bucket.
"""
from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from scoring.arithmetic import Allowance, arithmetic_note
from scoring.evaluated import EvaluatedRun
from scoring.families import family_markdown, tested_family
from scoring.groups import table_rows
from scoring.loaded import LoadedRun, as_loaded
from scoring.metrics import SEED_ADJUSTMENT, corpus_chrf
from scoring.saturation import saturation_caption
from scoring.significance import seed_summary
from scoring.table_rows import BUCKET_COLUMNS
from scoring.table_text import csv_text
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


def pooled_rows(run_dirs: Sequence[LoadedRun | Path], testsets: list[str],
                labels: dict[Path, str] | None = None) -> tuple[dict[str, list[EvaluatedRun]], list[str]]:
    """The table's rows with each run's hypotheses and references of ``testsets`` joined in that
    order, and the joined sources (the first run's; every run must have been given the same)."""
    pooled: dict[str, list[EvaluatedRun]] = {}
    sources: list[str] = []
    loaded = as_loaded(run_dirs)
    for number, testset in enumerate(testsets):
        rows = table_rows(loaded, testset, labels)
        for label, runs in rows.items():
            for i, run in enumerate(sorted(runs, key=lambda r: r.seed)):
                if number == 0:
                    pooled.setdefault(label, []).append(run)
                else:
                    before = pooled[label][i]
                    pooled[label][i] = replace(before, hyps=before.hyps + run.hyps, refs=before.refs + run.refs,
                                               scores=before.scored + run.scored)
        first = next(iter(rows.values()))[0]
        sources += first.run.evaluation(testset).sources
    return pooled, sources


def in_bucket(rows: dict[str, list[EvaluatedRun]], sources: list[str], bucket: Bucket) -> dict[str, list[EvaluatedRun]]:
    """``rows`` cut to the sentences whose source length (words) lies in ``bucket``."""
    lo, hi = bucket
    keep = [i for i, s in enumerate(sources) if lo <= len(s.split()) and (hi is None or len(s.split()) <= hi)]
    if not keep:
        raise UserError(f"no test sentence has a source of {bucket_name(bucket)} words")
    return {label: [replace(r, hyps=[r.hyps[i] for i in keep], refs=[r.refs[i] for i in keep], scores=r.scored.take(keep))
                    for r in runs]
            for label, runs in rows.items()}


BUCKET_HEADER = [c.title for c in BUCKET_COLUMNS]  # read back by scoring.table_rows.buckets_from_csv


def bucket_rows(rows: dict[str, list[EvaluatedRun]], bucket: Bucket) -> list[list[str]]:
    """One CSV line (``BUCKET_HEADER``) per row of ``rows`` (already cut to the bucket), best BLEU first."""
    summaries = {label: seed_summary(runs) for label, runs in rows.items()}
    return [[label, bucket_name(bucket), str(len(rows[label][0].refs)), str(len(rows[label])), f"{bleu:.2f}",
             f"{low:.2f}", f"{high:.2f}", f"{statistics.mean(corpus_chrf(r.hyps, r.refs).value for r in rows[label]):.2f}",
             f"{ratio:.3f}", f"{nobp:.2f}", ";".join(f"{b:.2f}" for b in seeds)]
            for label, (bleu, low, high, ratio, nobp, seeds) in sorted(summaries.items(),
                                                                        key=lambda item: (-item[1][0], item[0]))]


def bucket_tables(run_dirs: Sequence[LoadedRun | Path], testsets: list[str], buckets: list[str], families: dict,
                  allow_mixed_arithmetic: Allowance = False, labels: dict[Path, str] | None = None,
                  standings: dict[str, str] | None = None) -> dict[str, str]:
    """File name -> text: ``buckets_<test sets>.md`` (a table per bucket: each row's BLEU with its
    interval, chrF and length ratio) and its CSV twin (one line per row and bucket, ``BUCKET_HEADER``),
    and for each family and bucket ``family_<name>_words_<bucket>.md`` (+ CSV) (``standings``: each
    family's caption sentence on when it was declared)."""
    rows, sources = pooled_rows(run_dirs, testsets, labels)
    arithmetic = arithmetic_note({label: [r.run for r in runs] for label, runs in rows.items()},
                                 allow_mixed_arithmetic)
    parsed = [parse_bucket(b) for b in buckets]
    cut = {bucket: in_bucket(rows, sources, bucket) for bucket in parsed}
    table = {bucket: bucket_rows(cut[bucket], bucket) for bucket in parsed}
    lines = []
    for bucket in parsed:
        lines += [f"### Source length {bucket_name(bucket)} words ({table[bucket][0][2]} sentences)", "",
                  "| scheme | seeds | BLEU | BLEU 95% CI | chrF | length ratio | BLEU w/o BP | BLEU per seed |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r[0]} | {r[3]} | {r[4]} | [{r[5]}, {r[6]}] | {r[7]} | {r[8]} | {r[9]} | {r[10].replace(';', ', ')} |"
                  for r in table[bucket]]
        lines.append("")
    lines.append(f"Test sets {', '.join(f'`{t}`' for t in testsets)} pooled, sentences bucketed by source length "
                 f"(whitespace words, bounds included). BLEU and chrF: sacreBLEU, mean over seeds; CI: "
                 f"bootstrap over seeds x sentences ({SEED_ADJUSTMENT}); length ratio: hypothesis/reference length, mean over seeds; BLEU "
                 f"w/o BP: BLEU divided by its brevity penalty, the n-gram precisions alone (an output cut short "
                 f"is not also penalised for its length), mean over seeds; BLEU per seed: in seed order. "
                 f"{arithmetic} {saturation_caption({label: runs[0].run for label, runs in rows.items()})}".rstrip())
    stem = f"buckets_{'_'.join(testsets)}"
    rows = [BUCKET_HEADER, *(r for b in parsed for r in table[b])]
    made = {f"{stem}.md": "\n".join(lines) + "\n", f"{stem}.csv": csv_text(rows, lineterminator="\n")}
    for name, pairs in families.items():
        for bucket in parsed:
            where = f"source length {bucket_name(bucket)} words of {' + '.join(testsets)}"
            stem = f"family_{name}_words_{bucket_name(bucket)}"
            made[f"{stem}.md"], made[f"{stem}.csv"] = family_markdown(
                tested_family(cut[bucket], list(pairs)), where, name, arithmetic, (standings or {}).get(name, ""))
    return made


def write_bucket_tables(run_dirs: Sequence[LoadedRun | Path], testsets: list[str], buckets: list[str], families: dict,
                        folder: Path, allow_mixed_arithmetic: Allowance = False,
                        labels: dict[Path, str] | None = None, standings: dict[str, str] | None = None) -> list[Path]:
    """``bucket_tables`` written under ``folder``; returns the paths, in that order."""
    made = bucket_tables(run_dirs, testsets, buckets, families, allow_mixed_arithmetic, labels, standings)
    return [atomic_write_text(Path(folder) / name, text) for name, text in made.items()]
