"""The comparison table across evaluated runs (Markdown + CSV), read from their DIR/eval/ files:
one row per group of seeds, its interval, the metric columns (``scoring.table_metrics``, computed
from the archived hypotheses and references), and p / verdict against a baseline row.

Needs no model: ``test.py --compare`` and the studies' archives (small files only) use it. Reading
the runs: ``scoring.evaluated``; which runs may share a table: ``scoring.recipe``; the verdict:
``scoring.significance``.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from data.concatenated import group_size
from scoring.arithmetic import Allowance, arithmetic_note
from scoring.evaluated import EvaluatedRun, evaluated_rows, group_labels, replicates_note, row_keys
from scoring.loaded import LoadedRun, as_loaded
from scoring.metrics import SEED_ADJUSTMENT, Draws, seed_interval
from scoring.recipe import check_same_decoding
from scoring.saturation import saturation_caption
from scoring.significance import (
    BASELINE,
    SIGNIFICANCE,
    borderline_tally,
    monte_carlo_note,
    seed_spread,
    versus_baseline,
)
from scoring.table_metrics import DEFAULT_METRICS, METRICS, MetricScores, check_metrics
from scoring.table_rows import NONE, P_SE, ComparisonRow, ComparisonTable, MeanStd
from utils.errors import UserError
from utils.io import atomic_write_text


def _row(label: str, members: list[EvaluatedRun], base_runs: list[EvaluatedRun], draws: Draws, pooled: float | None,
         is_base: bool, testset: str, metrics: list[str], book: MetricScores) -> ComparisonRow:
    """One table row: a configuration's seeds folded (mean ± std), its interval, each metric of
    ``metrics`` over its seeds (scored by ``book``), and p / verdict against the baseline's runs (``—``
    for the baseline itself)."""
    first, base = members[0], base_runs[0]
    for m in members:
        if m.refs != base.refs:
            raise UserError(f"{m.run_dir} and {base.run_dir} were scored on different references for '{testset}'")
    bleus = [m.record.bleu for m in members]
    if len(members) == 1:
        low, high = first.record.bleu_ci95
    else:
        low, high = seed_interval([m.scored for m in members], draws)
    losses = [m.valid_loss for m in members if m.valid_loss is not None]
    p, error, verdict = None, None, NONE
    if not is_base:
        p, error, verdict = versus_baseline([m.scored for m in members], [m.scored for m in base_runs], draws,
                                            (bleus, [m.record.bleu for m in base_runs]), pooled)
    scores = {name: MeanStd.of([book.score(name, m.hyps, m.refs) for m in members]) for name in metrics}
    return ComparisonRow(label, len(members), first.parameters or None, MeanStd.of(losses, 3) if losses else None,
                         MeanStd.of(bleus), (low, high), scores, p, error, verdict)


def _footnote(testset: str, base: EvaluatedRun, n_resamples: int, pooled: float | None, pooled_used: bool,
              metrics: list[str], borderlines: list[bool]) -> str:
    """What the table's columns mean: the test set, the decoding, the signature, the statistics
    (the pooled seed spread is named only when a verdict used it; ``borderlines``: which verdicts are)."""
    if pooled is None:
        spread_note = ("no row has several seeds, so training noise is not measured: the verdict (marked 'one seed') "
                       "accounts for test-set sampling only")
    elif pooled_used:
        spread_note = ("the seed spread is the larger seed std of the two rows, or where both have a single seed the "
                       f"pooled seed std of the multi-seed rows ({pooled:.2f} BLEU)")
    else:
        spread_note = "the seed spread is the larger seed std of the two rows"
    rule = base.record.decode.rule()
    return (f"Test set `{testset}`, {len(base.refs)} sentences, decoding: beam {rule['beam']}, length "
            f"penalty {rule['len_penalty']}, stopping rule {rule['stopping']}. sacreBLEU signature: "
            f"`{base.record.signature}`. Runs that differ only in "
            f"seed are folded into mean ± std (sample std). CI: {n_resamples} bootstrap resamples of the sentences "
            f"(several seeds: of seeds x sentences, the mean over seeds; {SEED_ADJUSTMENT}). p: two-sided paired bootstrap "
            f"(Koehn 2004) over seeds x sentences (Clark et al. 2011), uncorrected (the study's declared families "
            f"correct theirs). Significant: p < {SIGNIFICANCE} and the "
            f"difference of means larger than the seed spread; {spread_note}. {monte_carlo_note(P_SE)} {borderline_tally(borderlines)}"
            + "".join(f" {METRICS[name].header}: {METRICS[name].meaning}." for name in metrics))


def compare(run_dirs: Sequence[LoadedRun | Path], testset: str, baseline: LoadedRun | Path | None = None,
            metrics: list[str] | None = None, allow_mixed_arithmetic: Allowance = False,
            labels: dict[Path, str] | None = None, scores: MetricScores | None = None) -> tuple[str, str]:
    """Markdown and CSV comparison tables: one row per configuration, seeds folded into mean ± std
    (replicates, runs of one recipe and seed, are rows of their own: ``row_keys``); ``metrics`` names
    the metric columns (default ``DEFAULT_METRICS``), in that order.

    BLEU carries a 95% interval: for one run the sentence bootstrap of its BLEU, for several seeds
    the two-level (seeds x sentences) bootstrap of their mean. p is the two-sided paired bootstrap
    of the row against the baseline over seeds x sentences (``seed_paired_bootstrap_p``; with one
    seed each, Koehn's paired bootstrap). A difference is called significant only when p < 0.05
    and it is larger than the seed spread (the two rows' larger seed std, or when both have one seed
    the pooled seed std of the table's multi-seed rows).

    The runs must share one arithmetic (``scoring.arithmetic``) unless ``allow_mixed_arithmetic``;
    the footnote says which, or lists the mix. ``labels`` (run folder -> label, e.g. a study's row
    labels) names the rows, the runs of one label forming a row; by default a row is named by its
    scheme, and the settings that set it apart where two rows share one (``group_labels``).
    ``scores``: the metric scores a study's tables share (``scoring.table_metrics.scores_kept_in``).
    """
    metrics = check_metrics(DEFAULT_METRICS if metrics is None else metrics)
    loaded = as_loaded(run_dirs)
    if baseline is not None:
        baseline = as_loaded([baseline])[0]
        if baseline.folder.resolve() not in {run.folder.resolve() for run in loaded}:
            loaded.append(baseline)  # the baseline is a row of the table
    runs = evaluated_rows(loaded, testset)
    check_same_decoding(runs, testset)
    runs.sort(key=lambda r: r.seed)  # a row's seeds in seed order, whatever order the folders came in
    groups: dict[str, list[EvaluatedRun]] = {}
    for key, r in zip(row_keys([(r.group, r.seed, r.run_dir) for r in runs], labels), runs):
        groups.setdefault(key, []).append(r)
    base_key = (_row_of(groups, baseline.folder) if baseline is not None
                else next((key for key, g in groups.items() if g[0].scheme == BASELINE and not g[0].variant),
                          next(iter(groups))))
    base_runs = groups[base_key]
    base = base_runs[0]
    draws = Draws(len(base.refs))
    pooled = seed_spread(list(groups.values()))
    labels = group_labels({key: (members[0].row_scheme, members[0].run) for key, members in groups.items()},
                          labels)
    arithmetic = arithmetic_note({labels[key]: [m.run for m in members] for key, members in groups.items()},
                                 allow_mixed_arithmetic)

    mean_bleu = {key: sum(m.record.bleu for m in members) / len(members) for key, members in groups.items()}
    book = MetricScores() if scores is None else scores
    rows = [_row(labels[key], members, base_runs, draws, pooled, key == base_key, testset, metrics, book)
            for key, members in sorted(groups.items(), key=lambda item: -mean_bleu[item[0]])]
    table = ComparisonTable(rows, labels[base_key], tuple(metrics))
    md = table.markdown()
    pooled_used = len(base_runs) == 1 and any(len(g) == 1 for key, g in groups.items() if key != base_key)
    replicates = replicates_note(g[0].group for g in groups.values())
    caption = _footnote(testset, base, draws.samples, pooled, pooled_used, metrics,
                        [r.borderline for r in rows if r.p is not None]) + replicates + " " + arithmetic
    if group_size(testset) > 1:  # inputs k sentences long: where a scheme saturates is part of the reading
        caption = f"{caption} {saturation_caption({labels[k]: g[0].run for k, g in groups.items()})}".rstrip()
    md += ["", caption]
    return "\n".join(md) + "\n", table.to_csv()


def _row_of(groups: dict[str, list[EvaluatedRun]], run_dir: Path) -> str:
    """The row holding the run in ``run_dir``."""
    wanted = Path(run_dir).resolve()
    return next(key for key, members in groups.items() if any(m.run_dir.resolve() == wanted for m in members))


def write_comparison(run_dirs: Sequence[LoadedRun | Path], testset: str, out: Path,
                     baseline: LoadedRun | Path | None = None,
                     metrics: list[str] | None = None, allow_mixed_arithmetic: Allowance = False,
                     labels: dict[Path, str] | None = None, scores: MetricScores | None = None) -> tuple[Path, Path]:
    """``compare`` written to ``out`` (Markdown) and ``out`` with suffix .csv; returns both paths."""
    markdown, table_csv = compare(run_dirs, testset, baseline, metrics, allow_mixed_arithmetic, labels, scores)
    out = Path(out)
    atomic_write_text(out, markdown)
    atomic_write_text(out.with_suffix(".csv"), table_csv)
    return out, out.with_suffix(".csv")
