"""Pictures of finished runs read from their files: training curves (metrics.jsonl) and BLEU by
source length (eval/<test set>/results.json)."""
from __future__ import annotations

import collections
import copy
import functools
import operator
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis import pictures
from experiment.config import recipe_hash
from experiment.run_dir import RunDir, load_run_config, read_metrics_log
from models.positional import KINDS, scheme_kind, scheme_parts
from scoring.evaluated import group_labels, replicates_note, row_keys
from scoring.loaded import LoadedRun, as_loaded
from scoring.metrics import Draws, Score, Scored, seed_interval
from scoring.significance import BASELINE, borderline_tally, monte_carlo_note, pooled_std, versus_baseline
from scoring.table_rows import NONE, P_SE, LengthRow, LengthTable, MeanStd
from utils.errors import UserError
from utils.io import atomic_write_text


def slug(text: str) -> str:
    """A file-name-safe version of ``text``."""
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", text).strip("-") or "x"


def run_label(run_dir: Path) -> str:
    """The run's folder name, with its scheme in brackets unless the folder is named after it."""
    scheme = load_run_config(run_dir).model.positional.name
    return run_dir.name if run_dir.name == scheme else f"{run_dir.name} ({scheme})"


def read_metrics(run_dir: Path) -> list[dict]:
    if not RunDir(run_dir).metrics.is_file():
        raise UserError(f"{run_dir} has no {RunDir(run_dir).metrics.name}")
    return read_metrics_log(run_dir)


def training_curves(run_dirs: list[Path], out: Path, fmt: str = "png") -> Path:
    """Training loss, validation loss and validation BLEU of the runs, overlaid, in one figure."""
    series = {}
    for d in map(Path, run_dirs):
        records = read_metrics(d)
        train = [r for r in records if r["kind"] == "train"]
        valid = [r for r in records if r["kind"] == "valid"]
        series[run_label(d)] = {
            "train loss": ([r["step"] for r in train], [r["loss"] for r in train]),
            "valid loss": ([r["step"] for r in valid], [r["loss"] for r in valid]),
            "valid BLEU": ([r["step"] for r in valid], [r["bleu"] for r in valid]),
        }
    name = "curves_" + "_".join(slug(Path(d).name) for d in run_dirs)[:120]
    return pictures.curves(series, "Training and validation: " + ", ".join(series), Path(out) / f"{name}.{fmt}")


def validation_panels(run_dirs: list[Path], out: Path, reference: str = "sinusoidal", mark: int | None = None,
                      fmt: str = "png") -> Path:
    """Each scheme's validation BLEU against updates, one panel per scheme with a curve per seed and
    ``reference``'s mean curve in every panel; ``mark``: an update the curves have no point at (e.g.
    a shorter budget's end), drawn dotted. Schemes in the order of their last validation BLEU."""
    by_scheme: dict[str, list[tuple[list[int], list[float]]]] = {}
    for d in map(Path, run_dirs):
        valid = [r for r in read_metrics(d) if r["kind"] == "valid"]
        by_scheme.setdefault(load_run_config(d).model.positional.name, []).append(
            ([r["step"] for r in valid], [r["bleu"] for r in valid]))
    if reference not in by_scheme:
        raise UserError(f"no run of the reference scheme '{reference}' among the runs")
    base = by_scheme[reference]
    steps = base[0][0]
    if any(s != steps for s, _ in base):
        raise UserError(f"the runs of '{reference}' were validated at different updates")
    mean = [sum(values[i] for _, values in base) / len(base) for i in range(len(steps))]
    order = sorted(by_scheme, key=lambda s: -sum(v[-1] for _, v in by_scheme[s] if v) / len(by_scheme[s]))
    title = "Validation BLEU by update, a panel per scheme (blue: each seed; grey: " + reference + "'s mean)"
    if mark is not None:
        title += f"; dotted: update {mark}"
    return pictures.curve_panels({s: by_scheme[s] for s in order}, (reference, steps, mean), title,
                                 Path(out) / f"validation_by_scheme.{fmt}", mark)


@dataclass
class EvaluatedSet:
    """A run's sources, hypotheses and references on one or more test sets (pooled)."""

    scheme: str  # with +<variant> for a study's evaluation variant
    recipe: str  # config hash without seed (+ the variant): runs that differ only in seed share it
    seed: int
    sources: list[str]
    hypotheses: list[str]
    references: list[str]
    scored: Scored  # the hypotheses scored sentence by sentence


def read_evaluated(run: LoadedRun, testsets: list[str]) -> EvaluatedSet:
    """The run's texts of ``testsets``, pooled in that order."""
    cfg = copy.copy(run.config)
    evaluations = [run.evaluation(name) for name in testsets]
    seed, cfg.seed = cfg.seed, 0
    variant = next((evaluation.record.variant for evaluation in evaluations), None)
    return EvaluatedSet(cfg.model.positional.name + (f"+{variant}" if variant else ""),
                        recipe_hash(cfg) + (f"+{variant}" if variant else ""), seed,
                        [line for e in evaluations for line in e.sources], [line for e in evaluations for line in e.hypotheses],
                        [line for e in evaluations for line in e.references],
                        functools.reduce(operator.add, (e.scored for e in evaluations)))


def training_max_words(run: LoadedRun | Path) -> int | None:
    """The longest training source in words when the run's config fixes it (``data.max_src_words``, or the
    synthetic training split's ``max_words``); None otherwise."""
    data = run.config.data if isinstance(run, LoadedRun) else load_run_config(run).data
    if data.max_src_words > 0:
        return data.max_src_words
    if data.source == "synthetic" and data.train_split in data.synthetic:
        return data.synthetic[data.train_split].max_words
    return None


def length_buckets(lengths: list[int], boundary: int | None, min_count: int = 60) -> list[tuple[int, int]]:
    """Consecutive source lengths grouped into (lo, hi) buckets of at least ``min_count`` sentences
    (the last may be smaller), never crossing ``boundary`` (a bucket ends at it)."""
    counts = {n: lengths.count(n) for n in sorted(set(lengths))}
    buckets, lo, total = [], None, 0
    for n, count in counts.items():
        lo = n if lo is None else lo
        total += count
        if total >= min_count or n == boundary:
            buckets.append((lo, n))
            lo, total = None, 0
    if lo is not None:
        if buckets and total < min_count / 2 and buckets[-1][1] != boundary:
            buckets[-1] = (buckets[-1][0], max(counts))
        else:
            buckets.append((lo, max(counts)))
    return buckets


@dataclass
class LengthSeries:
    """Runs grouped into rows (their seeds together) and scored per source-length bucket (``length_series``)."""

    testsets: list[str]
    limit: int | None  # the longest training source in words, when the config fixes it
    lengths: list[int]  # each pooled test sentence's source length in words
    buckets: list[tuple[int, int]]
    members: list[list[int]]  # each bucket's sentence indices
    groups: dict[str, list[EvaluatedSet]]  # row key -> its runs
    labels: dict[str, str]  # row key -> its label
    series: dict[str, dict]  # label -> {"x": bucket mean lengths, "bleu", "ratio": (seeds, buckets) lists}


def length_series(run_dirs: Sequence[LoadedRun | Path], testsets: list[str] | None = None, min_count: int = 60,
                  labels: dict[Path, str] | None = None) -> LengthSeries:
    """The runs' test sets (default: each run's configured ``data.test_splits``) pooled, their rows
    formed (seeds of one recipe together, replicates apart; with ``labels``, run folder -> label, the
    runs of one label) and BLEU and length ratio computed per source-length bucket (at least
    ``min_count`` sentences, none crossing the training maximum)."""
    runs = as_loaded(run_dirs)
    run_dirs = [run.folder for run in runs]
    testsets = testsets or runs[0].config.data.test_splits
    sets = [read_evaluated(run, testsets) for run in runs]
    for d, s in zip(run_dirs, sets):
        if s.references != sets[0].references:
            raise UserError(f"{d} and {run_dirs[0]} were scored on different references for {', '.join(testsets)}")
    limit = training_max_words(runs[0])
    lengths = [len(src.split()) for src in sets[0].sources]
    buckets = length_buckets(lengths, limit, min_count)
    members = [[i for i, n in enumerate(lengths) if lo <= n <= hi] for lo, hi in buckets]
    groups: dict[str, list[EvaluatedSet]] = {}
    firsts: dict[str, LoadedRun] = {}  # a row's first run (two runs' sets may be equal: replicates)
    named = None if labels is None else {Path(d): label for d, label in labels.items()}
    for key, s, run in zip(row_keys([(s.recipe, s.seed, d) for s, d in zip(sets, run_dirs)], named), sets, runs):
        groups.setdefault(key, []).append(s)
        firsts.setdefault(key, run)
    for group in groups.values():  # a row's seeds in seed order, whatever order the folders came in (the bootstrap pairs them)
        group.sort(key=lambda s: s.seed)
    labels = group_labels({key: (g[0].scheme, firsts[key]) for key, g in groups.items()}, named)
    series = {}
    for key, group in groups.items():
        scores = [[_bleu(s, idx) for idx in members] for s in group]
        series[labels[key]] = {"x": [statistics.mean(lengths[i] for i in idx) for idx in members],
                               "bleu": [[b.value for b in run] for run in scores],
                               "ratio": [[b.length_ratio for b in run] for run in scores]}
    return LengthSeries(testsets, limit, lengths, buckets, members, groups, labels, series)


def _bleu(s: EvaluatedSet, idx: list[int]) -> Score:
    return s.scored.take(idx).bleu


def length_study(run_dirs: Sequence[LoadedRun | Path], out: Path, testsets: list[str] | None = None, fmt: str = "png",
                 min_count: int = 60, labels: dict[Path, str] | None = None) -> list[Path]:
    """BLEU and hypothesis/reference length ratio by source length, a line per scheme (a band over
    its seeds), the training maximum marked; and a table (Markdown and CSV) with BLEU per bucket and on the
    sentences within / beyond the training maximum (mean ± std over seeds). The test sets (default:
    each run's configured ``data.test_splits``) are pooled; ``labels`` names the rows (``length_series``).
    Returns [picture, table (Markdown), table (CSV)]."""
    found = length_series(run_dirs, testsets, min_count, labels)
    testsets, limit, lengths, groups, labels = found.testsets, found.limit, found.lengths, found.groups, found.labels
    rows = []
    split = {"within": [i for i, n in enumerate(lengths) if limit is None or n <= limit],
             "beyond": [i for i, n in enumerate(lengths) if limit is not None and n > limit]}
    beyond = _beyond_statistics(groups, split["beyond"])
    for key, group in groups.items():
        bleu = found.series[labels[key]]["bleu"]
        cells = [MeanStd.of([run[j] for run in bleu]) for j in range(len(found.buckets))]
        within, longer = (MeanStd.of([_bleu(s, idx).value for s in group]) if idx else None for idx in split.values())
        rows.append(LengthRow(labels[key], len(group), within, longer, cells, *(beyond[key] if beyond else ())))
    title = f"BLEU by source length on {' + '.join(testsets)}"
    stem = slug("bleu_by_length_" + "_".join(testsets))
    picture = pictures.length_curves(found.series, title, Path(out) / f"{stem}.{fmt}", limit)
    names = [f"{lo}–{hi}" if lo != hi else str(lo) for lo, hi in found.buckets]
    table = LengthTable(sorted(rows, key=lambda r: r.label), limit,
                        [f"{n} ({len(m)})" for n, m in zip(names, found.members)], BASELINE if beyond else None)
    md = table.markdown()
    md += ["", f"Test sets {', '.join(f'`{t}`' for t in testsets)} pooled ({len(lengths)} sentences); sacreBLEU "
           f"per source-length bucket (words; sentences per bucket in brackets); mean ± std over seeds."
           + (f" Training and validation sources had at most {limit} words; "
              f"{len(split['beyond'])} test sentences are longer." if limit is not None else "")
           + (f" On those: the 95% interval, p and verdict of the comparison tables (bootstrap over seeds x "
              f"sentences against {BASELINE}; significant: p < 0.05 and a difference larger than the seed spread, "
              f"or 'one seed' when no row has several seeds). {monte_carlo_note(P_SE)} "
              f"{borderline_tally([r.borderline for r in rows if r.p is not None])}" if beyond else "")
           + replicates_note(g[0].recipe for g in groups.values())]
    return [picture, atomic_write_text(Path(out) / f"{stem}.md", "\n".join(md) + "\n"),
            atomic_write_text(Path(out) / f"{stem}.csv", table.to_csv())]


def length_by_kind(run_dirs: list[Path], out: Path, testsets: list[str] | None = None, fmt: str = "png",
                   min_count: int = 60, baseline: str = BASELINE, labels: dict[Path, str] | None = None) -> list[Path]:
    """Two figures of BLEU and length ratio by source length, each line a row's mean over its seeds
    with a band from its lowest to its highest seed, the training maximum marked: the rows without a
    test-time setting in a panel per kind of scheme (``models.positional.KINDS``; ``baseline`` grey in
    each), and each row decoded under settings (``<row>+<setting>``) in a panel of its own, its plain
    line beside each setting's — the rows with the most settings (a length study's rotary rows: oracle,
    log-n, PI, NTK, YaRN), only when some row has one; ``labels`` names the rows (``length_series``).
    Returns the pictures' paths."""
    found = length_series(run_dirs, testsets, min_count, labels)
    scheme = {found.labels[key]: scheme_parts(group[0].scheme)[0] for key, group in found.groups.items()}
    plain = [label for label in found.series if "+" not in label]
    panels: dict[str, dict[str, dict]] = {kind: {} for kind in KINDS}
    for label in sorted(plain):
        if label != baseline:
            panels[scheme_kind(scheme[label])][label] = found.series[label]
    stem = slug("bleu_by_length_" + "_".join(found.testsets))
    shown = ", ".join(found.testsets)
    made = [pictures.length_panels({k: v for k, v in panels.items() if v}, found.series.get(baseline), baseline,
                                   f"BLEU and length ratio by source length on {shown}, a panel per kind of scheme "
                                   f"(mean over seeds, band: lowest to highest seed)",
                                   Path(out) / f"{stem}_by_kind.{fmt}", found.limit)]
    counts = collections.Counter(label.split("+")[0] for label in found.series if "+" in label)
    most = [row for row, n in counts.items() if n == max(counts.values(), default=0)]  # e.g. the rotary rows
    rows = {row: {("as trained" if lab == row else lab.split("+", 1)[1]): found.series[lab]
                  for lab in sorted(found.series) if lab == row or lab.startswith(row + "+")}
            for row in sorted(most)}
    if rows:
        made.append(pictures.length_panels(rows, None, baseline, f"Test-time settings by source length on {shown}, "
                                           f"a panel per row (mean over seeds, band: lowest to highest seed)",
                                           Path(out) / f"{stem}_settings.{fmt}", found.limit))
    return made


def _beyond_statistics(groups: dict[str, list[EvaluatedSet]],
                       beyond: list[int]) -> dict[str, tuple[tuple[float, float], float | None, float | None, str]] | None:
    """Per group, on the sentences longer than any training source: the 95% interval of BLEU, p
    against the sinusoidal group, its Monte Carlo standard error and the verdict (as in the
    comparison tables); None when there are no such sentences or no sinusoidal group."""
    base = next((key for key, g in groups.items() if g[0].scheme == BASELINE), None)
    if not beyond or base is None:
        return None
    scored = {key: [s.scored.take(beyond) for s in g] for key, g in groups.items()}
    bleus = {key: [run.bleu.value for run in runs] for key, runs in scored.items()}
    draws = Draws(len(beyond))
    pooled = pooled_std(list(bleus.values()))
    cells = {}
    for key, runs in scored.items():
        low, high = seed_interval(runs, draws)
        p, error, verdict = None, None, NONE
        if key != base:
            p, error, verdict = versus_baseline(runs, scored[base], draws, (bleus[key], bleus[base]), pooled)
        cells[key] = ((low, high), p, error, verdict)
    return cells
