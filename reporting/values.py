"""The values a reading's placeholders name, each computed from the archive by a resolver of a registry.

A placeholder is ``{{name.KEY}}`` (``NAMES``: names that hold digits), ``{{bench.KEY}}`` (``BENCH_VALUES``)
or ``{{STUDY[.first|.second].KEY}}`` (``STUDY`` of ``reporting.sources.STUDIES``; ``first``, ``second``: the
study's first or second test set, the first by default — but the verdicts ``better``, ``worse``,
``group_a``, ``pairs`` and ``family`` of a study with two test sets must name theirs), resolved by the first
of ``STUDY_VALUES`` that takes its key, the keys read off a comparison table by ``TABLE_VALUES``. Each
resolver says how its placeholders are written and what they give; docs/placeholders.md lists them (``nmt
docs``). Lists of rows read "`a`, `b` and `c`"; an unknown name or a value the archive cannot give is a
one-line error.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from experiment.config import to_dict
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
from scoring.table_rows import ComparisonRow, GroupsTable
from studies.catalog import load_studies
from utils.config import flatten
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


@dataclass(frozen=True)
class Where:
    """Where a placeholder is resolved: the checkout's root, and for a study's value its report alias,
    the test set it reads (the first, or the one named) and the table (``versus``: the archived table
    against that row, ``comparison_vs_BASE``; None: the study's own)."""

    root: Path
    name: str  # the whole placeholder, for messages
    study: str = ""
    testset: str = ""
    versus: str | None = None


@dataclass(frozen=True)
class Resolver:
    """One kind of placeholder: how it is written (``form``, after ``STUDY.`` or ``bench.``), what it gives,
    which keys it takes and the function that gives the text of one."""

    form: str
    meaning: str
    matches: Callable[[str], bool]
    resolve: Callable[[Where, str], str]


def keys(*names: str) -> Callable[[str], bool]:
    return lambda key: key in names


def prefixed(prefix: str) -> Callable[[str], bool]:
    return lambda key: key.startswith(prefix)


def first_match(resolvers: list[Resolver], where: Where, key: str) -> str:
    """The text of ``key`` by the first of ``resolvers`` that takes it; an unknown key is a one-line error."""
    found = next((r for r in resolvers if r.matches(key)), None)
    if found is None:
        raise UserError(f"unknown placeholder {where.name}")
    return found.resolve(where, key)


# ---------------------------------------------------------------- bench.KEY: report/bench/bench.json


def _costs(where: Where) -> dict[str, float]:
    bench = read_bench(where.root)
    if bench is None:
        raise UserError("the report's placeholder bench.* needs report/bench/bench.json (make bench, then copy it)")
    return training_costs(bench)


def _extreme(where: Where, key: str) -> str:
    others = {s: c for s, c in _costs(where).items() if s != "sinusoidal"}
    pick = (max if key.startswith("slowest") else min)(others, key=others.get)
    return f"{others[pick]:.2f}" if key.endswith(".cost") else f"`{pick}`"


def _scheme_cost(where: Where, key: str) -> str:
    costs = _costs(where)
    if key[:-len(".cost")] not in costs:
        raise UserError(f"unknown placeholder {where.name}")
    return f"{costs[key[:-len('.cost')]]:.2f}"


def _bench_field(where: Where, key: str) -> str:
    _costs(where)  # the file must be there
    return str(read_bench(where.root).get(key, "not recorded"))


BENCH_VALUES = [
    Resolver("device, date", "the benchmark's machine and day", keys("device", "date"), _bench_field),
    Resolver("slowest, slowest.cost, fastest, fastest.cost", "the scheme slowest (fastest) to train, sinusoidal aside, "
             "and its training time over sinusoidal's", keys("slowest", "fastest", "slowest.cost", "fastest.cost"),
             _extreme),
    Resolver("SCHEME.cost", "a scheme's training time over sinusoidal's", lambda key: key.endswith(".cost"), _scheme_cost),
]


# ---------------------------------------------------------------- STUDY.KEY read off a comparison table


def _spread(rows: list[ComparisonRow]) -> str:
    """The mean seed standard deviation of BLEU over the rows with several seeds."""
    stds = [r.bleu.std for r in rows if r.bleu.std is not None]
    return f"{statistics.mean(stds):.2f}" if stds else "not measured (one seed per row)"


def p_text(p: float) -> str:
    """A table's p as prose: ``p = 0.004``, or ``p < 0.001`` where the table shows ``0.000``."""
    return "p < 0.001" if p < 0.0005 else f"p = {p:.3f}"


@dataclass(frozen=True)
class TableView:
    """A comparison table as its placeholders read it: rows by label, best first, and the verdicts
    against the baseline — the declared family's (Holm within it) where the study declares one."""

    rows: list[ComparisonRow]
    baseline: str
    bleu: dict[str, float]
    order: list[str]
    better: list[str]
    worse: list[str]

    @classmethod
    def of(cls, where: Where) -> TableView:
        table = read_table(where.root, where.study, where.testset, where.versus)
        rows, baseline = table.rows, table.baseline
        bleu = {r.label: r.bleu.mean for r in rows}
        order = sorted(bleu, key=lambda s: -bleu[s])
        verdicts = {r.label: r.significant for r in rows}
        family = baseline_family(where.root, where.study, where.testset, baseline) if where.versus is None else None
        if family is not None:  # the declared family's verdicts (Holm within it), not the table's uncorrected ones
            verdicts = {label: test.significant for label, test in family[1].items()}
        return cls(rows, baseline, bleu, order, [s for s in order if verdicts.get(s, False) and bleu[s] > bleu[baseline]],
                   [s for s in order if verdicts.get(s, False) and bleu[s] < bleu[baseline]])

    def row(self, key: str, where: Where) -> str:
        """The row a ``SCHEME.what`` key names (one of the table's)."""
        scheme = key.rpartition(".")[0]
        if scheme not in self.bleu:
            raise UserError(f"unknown placeholder {where.name}")
        return scheme


def _groups(where: Where) -> GroupsTable:
    if where.versus is not None:
        raise UserError(f"placeholder {where.name}: significance groups belong to the study's table")
    groups = read_groups(where.root, where.study, where.testset)
    if groups is None:
        raise UserError(f"placeholder {where.name}: no "
                        f"{Path(groups_table_path(where.study, where.testset)).with_suffix('.csv')} "
                        f"(python -m nmt study ... --table writes it)")
    return groups


def _in_group_a(where: Where) -> list[str]:
    letters = _groups(where).letters
    return [s for s in TableView.of(where).order if "a" in letters.get(s, "")]


def _scheme_p(where: Where, key: str) -> str:
    view = TableView.of(where)
    scheme = view.row(key, where)
    if scheme == view.baseline:
        raise UserError(f"placeholder {where.name}: `{scheme}` is the baseline of that table")
    return p_text(next(r.p for r in view.rows if r.label == scheme))


def _scheme_group(where: Where, key: str) -> str:
    letters = _groups(where).letters
    if key[:-len(".group")] not in letters:
        raise UserError(f"unknown placeholder {where.name}")
    return f"`{letters[key[:-len('.group')]]}`"


def _read(form: str, meaning: str, reads: dict[str, Callable[[TableView], str]]) -> Resolver:
    """The values ``reads`` (key -> a function of the table) of one kind."""
    return Resolver(form, meaning, keys(*reads), lambda where, key: reads[key](TableView.of(where)))


def _of_row(what: str, meaning: str, read: Callable[[TableView, str], str]) -> Resolver:
    """``SCHEME.what``: a value of the row a key names (``read``: of the table and the row's label)."""
    def resolve(where: Where, key: str) -> str:
        view = TableView.of(where)
        return read(view, view.row(key, where))
    return Resolver(f"SCHEME.{what}", meaning, lambda key: key.endswith(f".{what}"), resolve)


def _of_groups(form: str, meaning: str, reads: dict[str, Callable[[Where], str]]) -> Resolver:
    """Values of the significance groups (the study's table only)."""
    return Resolver(form, meaning, keys(*reads), lambda where, key: reads[key](where))


def _scheme_group(where: Where, key: str) -> str:
    letters = _groups(where).letters
    if key[:-len(".group")] not in letters:
        raise UserError(f"unknown placeholder {where.name}")
    return f"`{letters[key[:-len('.group')]]}`"


TABLE_VALUES = [
    _read("top, top.bleu", "the best row and its mean BLEU",
          {"top": lambda v: f"`{v.order[0]}`", "top.bleu": lambda v: f"{v.bleu[v.order[0]]:.2f}"}),
    _read("bottom, bottom.bleu", "the worst row and its mean BLEU",
          {"bottom": lambda v: f"`{v.order[-1]}`", "bottom.bleu": lambda v: f"{v.bleu[v.order[-1]]:.2f}"}),
    _read("baseline, baseline.bleu", "the row the table tests against and its mean BLEU",
          {"baseline": lambda v: f"`{v.baseline}`", "baseline.bleu": lambda v: f"{v.bleu[v.baseline]:.2f}"}),
    _read("better, better.count", "the rows significantly above the baseline: the verdicts of the study's declared "
          "family against it (Holm within the family) where it declares one, else the table's own",
          {"better": lambda v: listing(v.better), "better.count": lambda v: str(len(v.better))}),
    _read("worse, worse.count", "the rows significantly below it",
          {"worse": lambda v: listing(v.worse), "worse.count": lambda v: str(len(v.worse))}),
    _read("rows, seeds, spread", "the table's rows, the most seeds of a row, the mean seed std of BLEU",
          {"rows": lambda v: str(len(v.rows)), "seeds": lambda v: str(max(r.seeds for r in v.rows)),
           "spread": lambda v: _spread(v.rows)}),
    _of_groups("group_a, group_a.count", "the rows of the best row's significance group",
               {"group_a": lambda where: listing(_in_group_a(where)),
                "group_a.count": lambda where: str(len(_in_group_a(where)))}),
    _of_groups("pairs.different, pairs.total", "the pairs of rows found different (Holm over every pair), the pairs "
               "tested", {"pairs.different": lambda where: str(sum(t.significant for t in _groups(where).pairs)),
                          "pairs.total": lambda where: str(len(_groups(where).pairs))}),
    Resolver("SCHEME.group", "a row's letters", lambda key: key.endswith(".group"), _scheme_group),
    _of_row("bleu", "a row's mean BLEU", lambda v, s: f"{v.bleu[s]:.2f}"),
    _of_row("rank", "a row's place, best first", lambda v, s: str(v.order.index(s) + 1)),
    _of_row("seeds", "a row's number of seeds", lambda v, s: str(next(r.seeds for r in v.rows if r.label == s))),
    Resolver("SCHEME.p", "a row's p-value against the baseline (\"p = 0.004\", \"p < 0.001\")",
             lambda key: key.endswith(".p"), _scheme_p),
]


# ---------------------------------------------------------------- STUDY.KEY from the archive's other files


def _long(where: Where, key: str) -> str:
    """Values of the BLEU-by-length table beyond the training lengths: ``long.top``, ``long.SCHEME.bleu``."""
    rows = length_rows(where.root, where.study).rows
    key = key[len("long."):]
    if key == "top":
        return f"`{rows[0].label}`"
    bleu = {row.label: row.beyond.mean for row in rows}
    scheme, _, what = key.rpartition(".")
    if what == "bleu" and scheme in bleu:
        return f"{bleu[scheme]:.2f}"
    raise UserError(f"unknown placeholder {where.name}")


def _family(where: Where, key: str) -> str:
    """``family.NAME.KEY``: a declared family's verdicts on the test set, Holm within it."""
    name, _, what = key[len("family."):].partition(".")
    families = archived_families(where.root, where.study, where.testset)
    if name not in families:
        raise UserError(f"placeholder {where.study}.{key}: no family '{name}' archived on {where.testset} "
                        f"(families: {', '.join(families) or 'none'})")
    tests = families[name]
    above = [t.row for t in tests if t.significant and t.difference > 0]
    below = [t.row for t in tests if t.significant and t.difference < 0]
    values = {"total": str(len(tests)), "significant": str(len(above) + len(below)), "above": str(len(above)),
              "below": str(len(below)), "above.rows": listing(above), "below.rows": listing(below)}
    if what not in values:
        raise UserError(f"unknown placeholder {where.study}.{key} (keys: {', '.join(values)})")
    return values[what]


def _seed_ranking(where: Where, key: str) -> str:
    folder = STUDIES[where.study].folder
    found = sorted((Path(where.root) / folder).glob(f"ranking_seed*_vs_all_{where.testset}.md"))
    if not found:
        raise UserError(f"placeholder {where.study}.seed_ranking: {folder} has no first-seed ranking")
    return f"[{found[0].stem}]({folder}/{found[0].name})"


def _declared(where: Where) -> str:
    """The name of the declared study that made the report's study (a one-line error where none did)."""
    archive = STUDIES[where.study]
    if archive.study is None:
        raise UserError(f"placeholder {where.name}: {archive.folder} was not made by a declared study")
    return archive.study


def _base(where: Where, key: str) -> str:
    made_by = _declared(where)
    folder = Path(where.root) / "studies"
    checkout = Path(where.root) if folder.is_dir() else ROOT  # a root without studies/ reads this checkout's
    declared = (load_studies(folder) if folder.is_dir() else load_studies())[made_by]
    return f"`{declared.base_config.resolve().relative_to(checkout.resolve())}`"


def _cost(where: Where, key: str) -> str:
    cost = read_cost(where.root, where.study)
    if cost is None:
        raise UserError(f"placeholder {where.name}: {STUDIES[where.study].folder} has no cost.csv")
    if key == "core_hours" and cost.core_hours is None:
        raise UserError(f"placeholder {where.name}: {STUDIES[where.study].folder}/cost.csv sums no core-hours over "
                        f"CPU and GPU runs")
    return {"runs": str(cost.runs), "hours": f"{cost.hours:.1f}", "core_hours": f"{cost.core_hours:.1f}"}[key]


def _shift(where: Where, key: str, other: str = "cpu") -> str:
    """``shift``: each run of the study against the run of ``other`` with its folder name."""
    theirs = resolve(where.root, STUDIES[other].folder)
    pairs = [(run, theirs / run.name) for run in archived_run_dirs(where.root, where.study)
             if RunDir(theirs / run.name).config.is_file()]
    if len(pairs) < 2:
        raise UserError(f"placeholder {where.study}.shift: fewer than two runs of {STUDIES[where.study].folder} have a "
                        f"twin in {STUDIES[other].folder}")
    shifts = [read_record(RunDir(a).evaluation(where.testset).record).bleu
              - read_record(RunDir(b).evaluation(where.testset).record).bleu for a, b in pairs]
    return (f"{statistics.mean(shifts):+.2f} ± {statistics.stdev(shifts):.2f} BLEU (from {min(shifts):+.2f} to "
            f"{max(shifts):+.2f}, {len(shifts)} runs paired by scheme and seed)")


def _tau(where: Where, key: str) -> str:
    tau = read_tau(where.root, where.study, where.testset)
    if tau is None:
        raise UserError(f"placeholder {where.name}: {STUDIES[where.study].folder} has no ranking against another study")
    return tau


def _config(where: Where, key: str) -> str:
    keys, dotted = flatten(to_dict(first_config(where.root, where.study))), key.partition(".")[2]
    if dotted not in keys:
        raise UserError(f"placeholder {where.name}: no such key in the archived config")
    node = keys[dotted]
    return f"{node:,}" if isinstance(node, int) and not isinstance(node, bool) and abs(node) >= 10_000 else str(node)


def _versus(where: Where, key: str) -> str:
    versus, _, key = key[len("vs_"):].partition(".")
    return first_match(TABLE_VALUES, replace(where, versus=versus), key)


STUDY_VALUES = [
    Resolver("folder", "the archive's folder", keys("folder"),
             lambda where, key: f"`{STUDIES[where.study].folder}/`"),
    Resolver("link", "a link to the study's comparison table on the test set", keys("link"),
             lambda where, key: f"[{where.testset}]({table_path(where.study, where.testset)})"),
    Resolver("seed_ranking", "a link to the first seed's ranking beside all seeds'", keys("seed_ranking"), _seed_ranking),
    Resolver("reproduce, regenerate", "the commands that train the study and that remake its tables from the archive",
             keys("reproduce", "regenerate"),
             lambda where, key: f"`python -m nmt study {_declared(where)}" + (" --table`" if key == "regenerate" else "`")),
    Resolver("base", "the study's base config", keys("base"), _base),
    Resolver("runs, hours, core_hours", "from the archive's cost.csv", keys("runs", "hours", "core_hours"), _cost),
    Resolver("device", "the first archived run's device (its manifest)", keys("device"),
             lambda where, key: str(first_manifest(where.root, where.study).device or "unrecorded device")),
    Resolver("shift", "the paired shift of each run's BLEU against the run of the same folder name (scheme and seed) "
             "in the CPU study: mean ± std, range and count (e.g. the bf16 runs against their fp32 twins)",
             keys("shift"), _shift),
    Resolver("tau", "Kendall's tau-b against the study it is ranked against", keys("tau"), _tau),
    Resolver("long.top, long.SCHEME.bleu", "beyond the training lengths (the archive's bleu_by_length table)",
             prefixed("long."), _long),
    Resolver("family.NAME.KEY", "declared family NAME's hypotheses on the test set: total, and (Holm) significant, "
             "above, below (their count) and above.rows, below.rows (the rows)", prefixed("family."), _family),
    Resolver("config.SECTION.KEY", "the first archived run's resolved config", prefixed("config."), _config),
    Resolver("vs_BASE.KEY", "KEY of the archived table against row BASE (comparison_vs_BASE_<test set>), e.g. "
             "vs_rope.polar.p", prefixed("vs_"), _versus),
    Resolver("(a table's keys)", "the keys read off the study's comparison table, below", lambda key: True,
             lambda where, key: first_match(TABLE_VALUES, where, key)),
]


def _name(root: Path, name: str, key: str) -> str:
    if key not in NAMES:
        raise UserError(f"unknown placeholder {name} (names: {', '.join(NAMES)})")
    return NAMES[key]


def value(root: Path, name: str) -> str:
    """The text of placeholder ``name`` (see the module's docstring): ``name.KEY``, ``bench.KEY``
    (``BENCH_VALUES``) or ``STUDY[.first|.second].KEY`` (``STUDY_VALUES``, then ``TABLE_VALUES``)."""
    study, _, key = name.partition(".")
    if study == "name":
        return _name(root, name, key)
    if study == "bench":
        return first_match(BENCH_VALUES, Where(root, name), key)
    if study not in STUDIES or not key:
        raise UserError(f"unknown placeholder {name} (a study of {', '.join(STUDIES)} or bench, then a key)")
    testset, named = STUDIES[study].testsets[0], key.startswith(tuple(f"{t}." for t in TESTSET_NAMES))
    if named:
        which, key = key.split(".", 1)
        testset = STUDIES[study].testsets[TESTSET_NAMES.index(which)]
    if not named and len(STUDIES[study].testsets) > 1 and key.split(".")[0] in VERDICTS:
        raise UserError(f"placeholder {name} holds the verdicts of one test set: name it ({study}.first.{key} or "
                        f"{study}.second.{key}) and say which in the sentence")
    return first_match(STUDY_VALUES, Where(root, name, study, testset), key)


__all__ = ["value", "listing", "scheme_of", "BENCH_VALUES", "STUDY_VALUES", "TABLE_VALUES"]
