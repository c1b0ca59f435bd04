"""The values a reading's placeholders name, each computed from the archive.

A value is ``{{STUDY[.first|.second].KEY}}`` (``STUDY`` of ``reporting.sources.STUDIES``; ``first``,
``second``: the study's first or second test set, the first by default — but the verdicts ``better``,
``worse``, ``group_a`` and ``pairs`` of a study with two test sets must name theirs) with KEY one of:

    top, top.bleu, bottom, bottom.bleu   the best and worst rows and their mean BLEU
    baseline, baseline.bleu              the row the table tests against
    SCHEME.bleu, SCHEME.group, SCHEME.rank   a named row's mean BLEU, letters, place
    SCHEME.seeds                           its number of seeds
    SCHEME.p                             its p-value against the baseline ("p = 0.004", "p < 0.001")
    vs_BASE.KEY                          KEY of the archived table against scheme BASE
                                         (``comparison_vs_BASE_<test set>``), e.g. vs_rope.polar.p
    better, better.count                 rows significantly above the baseline: the verdicts of the
                                         study's declared family against it (Holm within the family)
                                         where it declares one, else the table's own
    worse, worse.count                   rows significantly below it
    group_a, group_a.count               the rows of the best row's significance group
    pairs.different, pairs.total         pairs found different, pairs tested (Holm)
    rows, seeds, spread                  rows of the table, the most seeds of a row, the mean seed std
    folder, link, seed_ranking           the archive's folder; links to its table and first-seed ranking
    reproduce, regenerate, base          the study's commands (train; tables from the archive) and base config
    runs, hours, core_hours              from the archive's cost.csv
    tau                                  Kendall's tau-b against the study it is ranked against
    shift                                the paired shift of each run's BLEU against the run of the same
                                         folder name (scheme and seed) in the CPU study: mean ± std,
                                         range and count (e.g. the bf16 runs against their fp32 twins)
    long.top, long.SCHEME.bleu           beyond the training lengths (the archive's bleu_by_length table)
    family.NAME.KEY                      declared family NAME's hypotheses on the test set: ``total``, and
                                         (Holm) ``significant``, ``above``, ``below`` (their count) and
                                         ``above.rows``, ``below.rows`` (the rows)
    config.SECTION.KEY, device           the first archived run's resolved config, its manifest's device

``{{name.KEY}}`` spells a name that holds digits (``NAMES``: the corpus, IWSLT2017, bf16, ...), and
``{{bench.KEY}}``: ``device``, ``date``, ``SCHEME.cost`` (training time over sinusoidal's),
``slowest``, ``slowest.cost``, ``fastest``, ``fastest.cost`` (sinusoidal aside). Lists of rows read
"`a`, `b` and `c`"; an unknown name or a value the archive cannot give is a one-line error.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from experiment.run_dir import RunDir
from reporting.sources import (
    STUDIES,
    TESTSET_NAMES,
    archived_families,
    archived_run_dirs,
    first_config,
    first_manifest,
    groups_table_path,
    read_bench,
    read_cost,
    read_groups,
    read_table,
    read_tau,
    resolve,
    table_path,
)
from reporting.tables import baseline_family, length_rows, scheme_of, training_costs
from scoring.record import read_record
from scoring.significance import BORDERLINE_SE
from scoring.table_rows import ComparisonRow
from studies.catalog import load_studies
from utils.errors import UserError
from utils.paths import ROOT

# names with digits, which readings spell through a placeholder (a reading holds no digit)
VERDICTS = ("better", "worse", "group_a", "pairs", "family")  # keys counting a test set's verdicts: their test set is named
NAMES = {"corpus": "Multi30k", "iwslt": "IWSLT2017", "half": "bf16", "single": "fp32", "buckets": "T5",
         "device": "H100", "seed_metric": "`seed_char_bleu4`", "iwslt_command": "`make reproduce-iwslt2017`",
         "recipe_search": "`report/multi30k-best/`", "variants": "`report/multi30k-variants/`",
         "short_remake": "`multi30k-short-h100`", "cpu_archive": "`report/multi30k/`",
         "extrapolation_archive": "`report/multi30k-extrapolation/`",
         "bessel": "√(n/(n − 1))", "borderline": f"{BORDERLINE_SE:g}"}


def listing(names: list[str]) -> str:
    """`a`, `b` and `c` (``none`` for no name)."""
    quoted = [f"`{n}`" for n in names]
    if not quoted:
        return "none"
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _bench_value(root: Path, key: str) -> str:
    bench = read_bench(root)
    if bench is None:
        raise UserError("the report's placeholder bench.* needs report/bench/bench.json (make bench, then copy it)")
    costs = training_costs(bench)
    if key in ("device", "date"):
        return str(bench.get(key, "not recorded"))
    others = {s: c for s, c in costs.items() if s != "sinusoidal"}
    if key in ("slowest", "fastest", "slowest.cost", "fastest.cost"):
        pick = (max if key.startswith("slowest") else min)(others, key=others.get)
        return f"{others[pick]:.2f}" if key.endswith(".cost") else f"`{pick}`"
    if key.endswith(".cost") and key[:-5] in costs:
        return f"{costs[key[:-5]]:.2f}"
    raise UserError(f"unknown placeholder bench.{key}")


def _spread(rows: list[ComparisonRow]) -> str:
    """The mean seed standard deviation of BLEU over the rows with several seeds."""
    stds = [r.bleu.std for r in rows if r.bleu.std is not None]
    return f"{statistics.mean(stds):.2f}" if stds else "not measured (one seed per row)"


def p_text(p: float) -> str:
    """A table's p as prose: ``p = 0.004``, or ``p < 0.001`` where the table shows ``0.000``."""
    return "p < 0.001" if p < 0.0005 else f"p = {p:.3f}"


def _table_value(root: Path, study: str, testset: str, key: str, versus: str | None = None) -> str:
    table = read_table(root, study, testset, versus)
    rows, baseline = table.rows, table.baseline
    bleu = {r.label: r.bleu.mean for r in rows}
    order = sorted(bleu, key=lambda s: -bleu[s])
    verdicts = {r.label: r.significant for r in rows}
    family = baseline_family(root, study, testset, baseline) if versus is None else None
    if family is not None:  # the declared family's verdicts (Holm within it), not the table's uncorrected ones
        verdicts = {label: test.significant for label, test in family[1].items()}
    better = [s for s in order if verdicts.get(s, False) and bleu[s] > bleu[baseline]]
    worse = [s for s in order if verdicts.get(s, False) and bleu[s] < bleu[baseline]]
    groups = read_groups(root, study, testset)
    simple = {"top": f"`{order[0]}`", "top.bleu": f"{bleu[order[0]]:.2f}", "bottom": f"`{order[-1]}`",
              "bottom.bleu": f"{bleu[order[-1]]:.2f}", "baseline": f"`{baseline}`", "baseline.bleu": f"{bleu[baseline]:.2f}",
              "better": listing(better), "better.count": str(len(better)), "worse": listing(worse),
              "worse.count": str(len(worse)), "rows": str(len(rows)),
              "seeds": str(max(r.seeds for r in rows)), "spread": _spread(rows)}
    if key in simple:
        return simple[key]
    if key.startswith(("group_a", "pairs.")) or key.endswith(".group"):
        if versus is not None:
            raise UserError(f"placeholder {study}.vs_{versus}.{key}: significance groups belong to the study's table")
        if groups is None:
            raise UserError(f"placeholder {study}.{key}: no {Path(groups_table_path(study, testset)).with_suffix('.csv')} "
                            f"(python -m nmt study ... --table writes it)")
        letters = groups.letters
        in_a = [s for s in order if "a" in letters.get(s, "")]
        values = {"group_a": listing(in_a), "group_a.count": str(len(in_a)),
                  "pairs.different": str(sum(t.significant for t in groups.pairs)), "pairs.total": str(len(groups.pairs))}
        if key.endswith(".group") and key[:-6] in letters:
            return f"`{letters[key[:-6]]}`"
        if key in values:
            return values[key]
    scheme, _, what = key.rpartition(".")
    if scheme in bleu and what == "bleu":
        return f"{bleu[scheme]:.2f}"
    if scheme in bleu and what == "rank":
        return str(order.index(scheme) + 1)
    if scheme in bleu and what == "seeds":
        return str(next(r.seeds for r in rows if r.label == scheme))
    if scheme in bleu and what == "p":
        if scheme == baseline:
            raise UserError(f"placeholder {study}.{key}: `{scheme}` is the baseline of that table")
        return p_text(table.row(scheme).p)
    raise UserError(f"unknown placeholder {study}.{key}")


def _long_value(root: Path, study: str, key: str) -> str:
    """Values of the BLEU-by-length table beyond the training lengths: ``top``, ``SCHEME.bleu``."""
    rows = length_rows(root, study).rows
    bleu = {row.label: row.beyond.mean for row in rows}
    if key == "top":
        return f"`{rows[0].label}`"
    scheme, _, what = key.rpartition(".")
    if what == "bleu" and scheme in bleu:
        return f"{bleu[scheme]:.2f}"
    raise UserError(f"unknown placeholder {study}.long.{key}")


def _family_value(root: Path, study: str, testset: str, key: str) -> str:
    """``family.NAME.KEY`` (module doc): a declared family's verdicts on ``testset``, Holm within it."""
    name, _, what = key.partition(".")
    families = archived_families(root, study, testset)
    if name not in families:
        raise UserError(f"placeholder {study}.family.{key}: no family '{name}' archived on {testset} "
                        f"(families: {', '.join(families) or 'none'})")
    tests = families[name]
    above = [t.row for t in tests if t.significant and t.difference > 0]
    below = [t.row for t in tests if t.significant and t.difference < 0]
    values = {"total": str(len(tests)), "significant": str(len(above) + len(below)), "above": str(len(above)),
              "below": str(len(below)), "above.rows": listing(above), "below.rows": listing(below)}
    if what not in values:
        raise UserError(f"unknown placeholder {study}.family.{key} (keys: {', '.join(values)})")
    return values[what]


def _archive_value(root: Path, study: str, testset: str, key: str) -> str:
    archive = STUDIES[study]
    if key == "folder":
        return f"`{archive.folder}/`"
    if key == "link":
        return f"[{testset}]({table_path(study, testset)})"
    if key == "seed_ranking":
        found = sorted((Path(root) / archive.folder).glob(f"ranking_seed*_vs_all_{testset}.md"))
        if not found:
            raise UserError(f"placeholder {study}.seed_ranking: {archive.folder} has no first-seed ranking")
        return f"[{found[0].stem}]({archive.folder}/{found[0].name})"
    if archive.study is None:
        raise UserError(f"placeholder {study}.{key}: {archive.folder} was not made by a declared study")
    if key == "base":
        folder = Path(root) / "studies"
        checkout = Path(root) if folder.is_dir() else ROOT  # a root without studies/ reads this checkout's
        declared = (load_studies(folder) if folder.is_dir() else load_studies())[archive.study]
        return f"`{declared.base_config.resolve().relative_to(checkout.resolve())}`"
    return f"`python -m nmt study {archive.study}" + (" --table`" if key == "regenerate" else "`")


def _shift_value(root: Path, study: str, testset: str, other: str = "cpu") -> str:
    """``shift`` (module doc): each run of ``study`` against the run of ``other`` with its folder name."""
    theirs = resolve(root, STUDIES[other].folder)
    pairs = [(run, theirs / run.name) for run in archived_run_dirs(root, study) if RunDir(theirs / run.name).config.is_file()]
    if len(pairs) < 2:
        raise UserError(f"placeholder {study}.shift: fewer than two runs of {STUDIES[study].folder} have a twin in "
                        f"{STUDIES[other].folder}")
    shifts = [read_record(RunDir(a).evaluation(testset).record).bleu - read_record(RunDir(b).evaluation(testset).record).bleu
              for a, b in pairs]
    return (f"{statistics.mean(shifts):+.2f} ± {statistics.stdev(shifts):.2f} BLEU (from {min(shifts):+.2f} to "
            f"{max(shifts):+.2f}, {len(shifts)} runs paired by scheme and seed)")


def value(root: Path, name: str) -> str:
    """The text of placeholder ``name`` (see the module's docstring)."""
    study, _, key = name.partition(".")
    if study == "name":
        if key not in NAMES:
            raise UserError(f"unknown placeholder {name} (names: {', '.join(NAMES)})")
        return NAMES[key]
    if study == "bench":
        return _bench_value(root, key)
    if study not in STUDIES or not key:
        raise UserError(f"unknown placeholder {name} (a study of {', '.join(STUDIES)} or bench, then a key)")
    testset, named = STUDIES[study].testsets[0], key.startswith(tuple(f"{t}." for t in TESTSET_NAMES))
    if named:
        which, key = key.split(".", 1)
        testset = STUDIES[study].testsets[TESTSET_NAMES.index(which)]
    if not named and len(STUDIES[study].testsets) > 1 and key.split(".")[0] in VERDICTS:
        raise UserError(f"placeholder {name} holds the verdicts of one test set: name it ({study}.first.{key} or "
                        f"{study}.second.{key}) and say which in the sentence")
    if key in ("folder", "reproduce", "regenerate", "base", "link", "seed_ranking"):
        return _archive_value(root, study, testset, key)
    if key in ("runs", "hours", "core_hours"):
        cost = read_cost(root, study)
        if cost is None:
            raise UserError(f"placeholder {name}: {STUDIES[study].folder} has no cost.csv")
        if key == "core_hours" and cost.core_hours is None:
            raise UserError(f"placeholder {name}: {STUDIES[study].folder}/cost.csv sums no core-hours over CPU and GPU runs")
        return {"runs": str(cost.runs), "hours": f"{cost.hours:.1f}", "core_hours": f"{cost.core_hours:.1f}"}[key]
    if key == "device":
        return str(first_manifest(root, study).device or "unrecorded device")
    if key == "shift":
        return _shift_value(root, study, testset)
    if key == "tau":
        tau = read_tau(root, study, testset)
        if tau is None:
            raise UserError(f"placeholder {name}: {STUDIES[study].folder} has no ranking against another study")
        return tau
    if key.startswith("long."):
        return _long_value(root, study, key[len("long."):])
    if key.startswith("family."):
        return _family_value(root, study, testset, key[len("family."):])
    if key.startswith("config."):
        node = first_config(root, study)
        for part in key.split(".")[1:]:
            if not isinstance(node, dict) or part not in node:
                raise UserError(f"placeholder {name}: no such key in the archived config")
            node = node[part]
        return f"{node:,}" if isinstance(node, int) and not isinstance(node, bool) and abs(node) >= 10_000 else str(node)
    if key.startswith("vs_"):
        versus, _, key = key[len("vs_"):].partition(".")
        return _table_value(root, study, testset, key, versus)
    return _table_value(root, study, testset, key)


__all__ = ["value", "listing", "scheme_of"]
