"""The archived tables as typed rows: what a comparison, a significance-groups, a family, a
BLEU-by-length and a cost table hold, each written to Markdown and CSV and read back from its CSV
by the same class, so the report reads rows as objects (a row's mean BLEU, its verdict, the
table's baseline) and never parses a cell or looks a column up by its title.

A table kind's columns are declared once (``Column``: title, the cell of a row, the field read back
from a cell); the writer (``scoring.table_text``) and the reader follow them. A number read back is
the number as written (rounded to its cell's digits); a verdict read back is the verdict written,
never recomputed from a rounded p.
"""
from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scoring.table_metrics import METRICS
from scoring.table_text import csv_text, markdown_table
from utils.errors import UserError

NONE = "—"  # the cell of a value a row does not have (the baseline's own p)
P_SE = "p MC SE"  # the title of an uncorrected p's Monte Carlo standard error


@dataclass(frozen=True)
class MeanStd:
    """A mean over seeds and its sample std (None for one seed), written ``48.41 ± 0.49`` or ``48.41``
    with ``digits`` decimals."""

    mean: float
    std: float | None = None
    digits: int = 2

    @classmethod
    def of(cls, values: Sequence[float], digits: int = 2) -> MeanStd:
        if len(values) == 1:
            return cls(values[0], None, digits)
        return cls(statistics.mean(values), statistics.stdev(values), digits)

    @classmethod
    def parse(cls, cell: str) -> MeanStd:
        mean, _, std = cell.partition(" ± ")
        digits = len(mean.partition(".")[2])
        return cls(float(mean), float(std) if std else None, digits)

    def __str__(self) -> str:
        mean = f"{self.mean:.{self.digits}f}"
        return mean if self.std is None else f"{mean} ± {self.std:.{self.digits}f}"


def _optional(parse: Callable[[str], Any], empty: str = "") -> Callable[[str], Any]:
    return lambda cell: None if cell == empty else parse(cell)


def _interval(cell: str) -> tuple[float, float]:
    low, high = cell.strip("[]").split(", ")
    return float(low), float(high)


def _yes(cell: str) -> bool:
    return cell == "yes"


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


@dataclass(frozen=True)
class Column:
    """One column of a table kind: its title, a row's cell, and the row field its cell is read into."""

    title: str
    cell: Callable[[Any], str]
    name: str  # the row's field
    parse: Callable[[str], Any]


def _read(kind: type, columns: Sequence[Column], header: Sequence[str], lines: Sequence[Sequence[str]],
          what: str) -> list:
    """Rows of ``kind`` from CSV ``lines`` under ``header``, which must be ``columns``' titles."""
    titles = [c.title for c in columns]
    if list(header) != titles:
        raise UserError(f"{what}: columns {', '.join(header)}; expected {', '.join(titles)} (remake the tables)")
    rows = []
    for number, line in enumerate(lines, start=2):
        try:
            values = {c.name: c.parse(cell) for c, cell in zip(columns, line, strict=True)}
        except ValueError as error:
            raise UserError(f"{what}, line {number}: {error}") from None
        rows.append(kind(**values))
    return rows


def _first_section(text: str, what: str) -> list[list[str]]:
    """The first CSV section of ``text``: its header and lines (a one-line error when there is none)."""
    section = _sections(text)[0]
    if not section:
        raise UserError(f"{what} holds no table (remake the tables)")
    return section


def _sections(text: str) -> list[list[list[str]]]:
    """The CSV sections of ``text`` (an empty line between two), each its header and lines."""
    sections: list[list[list[str]]] = [[]]
    for line in csv.reader(io.StringIO(text)):
        if line:
            sections[-1].append(line)
        else:
            sections.append([])
    return sections


@dataclass(frozen=True)
class ComparisonRow:
    """A row of the comparison table: a configuration's seeds folded."""

    label: str
    seeds: int
    parameters: int | None
    valid_loss: MeanStd | None
    bleu: MeanStd
    interval: tuple[float, float]  # 95% bootstrap interval of the (mean) BLEU
    metrics: dict[str, MeanStd]  # metric key (``scoring.table_metrics.METRICS``) -> its score over seeds
    p: float | None  # two-sided p against the baseline; None for the baseline itself
    p_se: float | None  # p's Monte Carlo standard error (scoring.significance.monte_carlo_se); None with p
    verdict: str  # "yes", "no", "yes (one seed)", "no (one seed)", marked borderline ("yes (borderline)",
    # "no (one seed, borderline)": scoring.significance.verdict), or "—" for the baseline

    @property
    def significant(self) -> bool:
        return self.verdict.startswith("yes")

    @property
    def borderline(self) -> bool:
        """Whether another draw of the bootstrap may turn the verdict (p within 3 errors of the level)."""
        return "borderline" in self.verdict


def _metric_column(key: str) -> Column:
    return Column(METRICS[key].header, lambda r: str(r.metrics[key]), f"metric:{key}", MeanStd.parse)


def comparison_columns(metrics: Sequence[str], baseline: str) -> dict[str, Column]:
    """The comparison table's columns, key -> column, in order (``metrics``: the metric keys)."""
    return {
        "label": Column("scheme", lambda r: r.label, "label", str),
        "seeds": Column("seeds", lambda r: str(r.seeds), "seeds", int),
        "parameters": Column("parameters", lambda r: f"{r.parameters:,}" if r.parameters else "", "parameters",
                             _optional(lambda c: int(c.replace(",", "")))),
        "valid_loss": Column("valid loss", lambda r: "" if r.valid_loss is None else str(r.valid_loss), "valid_loss",
                             _optional(MeanStd.parse)),
        "bleu": Column("BLEU", lambda r: str(r.bleu), "bleu", MeanStd.parse),
        "interval": Column("BLEU 95% CI", lambda r: f"[{r.interval[0]:.2f}, {r.interval[1]:.2f}]", "interval",
                           _interval),
        **{key: _metric_column(key) for key in metrics},
        "p": Column(f"p vs {baseline}", lambda r: NONE if r.p is None else f"{r.p:.3f}", "p",
                    _optional(float, NONE)),
        "p_se": Column(P_SE, lambda r: NONE if r.p_se is None else f"{r.p_se:.3f}", "p_se", _optional(float, NONE)),
        "verdict": Column("significant", lambda r: r.verdict, "verdict", str),
    }


@dataclass(frozen=True)
class ComparisonTable:
    """The comparison table: its rows (best first), the row they are tested against, the metric columns."""

    rows: list[ComparisonRow]
    baseline: str
    metrics: tuple[str, ...] = ()

    @property
    def columns(self) -> dict[str, Column]:
        return comparison_columns(self.metrics, self.baseline)

    def cells(self, row: ComparisonRow, keys: Sequence[str] | None = None) -> list[str]:
        """``row``'s cells in the columns ``keys`` (all by default)."""
        columns = self.columns
        return [columns[key].cell(row) for key in (keys or columns)]

    def markdown(self) -> list[str]:
        return markdown_table([c.title for c in self.columns.values()], (self.cells(r) for r in self.rows))

    def to_csv(self) -> str:
        return csv_text([[c.title for c in self.columns.values()], *(self.cells(r) for r in self.rows)])

    def row(self, label: str) -> ComparisonRow:
        return next(r for r in self.rows if r.label == label)

    @classmethod
    def from_csv(cls, text: str, what: str = "a comparison table") -> ComparisonTable:
        header, *lines = _sections(text)[0]
        titles = {METRICS[key].header: key for key in METRICS}
        baseline = next((h[len("p vs "):] for h in header if h.startswith("p vs ")), None)
        if baseline is None:
            raise UserError(f"{what} has no 'p vs' column (remake the tables)")
        metrics = tuple(titles[h] for h in header if h in titles)
        rows = _read(dict, list(comparison_columns(metrics, baseline).values()), header, lines, what)
        for row in rows:
            row["metrics"] = {key: row.pop(f"metric:{key}") for key in metrics}
        return cls([ComparisonRow(**row) for row in rows], baseline, metrics)


@dataclass(frozen=True)
class GroupRow:
    """A row of the significance groups: its mean BLEU over seeds and its letters."""

    label: str
    seeds: int
    bleu: float
    letters: str


@dataclass(frozen=True)
class PairTest:
    """Two rows tested against each other, Holm-corrected with every other pair of the table."""

    a: str
    b: str
    difference: float  # mean BLEU of a minus that of b
    p: float  # two-sided, uncorrected
    p_holm: float
    significant: bool  # p_holm < the level, as decided when tested (a rounded p read back is not re-judged)
    p_holm_se: float  # p_holm's Monte Carlo standard error (scoring.significance.monte_carlo_se, Holm's multiplier)
    borderline: bool  # p_holm within 3 such errors of the level: another draw of the bootstrap may turn the verdict


GROUP_COLUMNS = [Column("scheme", lambda r: r.label, "label", str), Column("seeds", lambda r: str(r.seeds), "seeds", int),
                 Column("BLEU", lambda r: f"{r.bleu:.2f}", "bleu", float),
                 Column("group", lambda r: r.letters, "letters", str)]
PAIR_COLUMNS = [Column("a", lambda t: t.a, "a", str), Column("b", lambda t: t.b, "b", str),
                Column("difference", lambda t: f"{t.difference:.2f}", "difference", float),
                Column("p", lambda t: f"{t.p:.4f}", "p", float), Column("p_holm", lambda t: f"{t.p_holm:.4f}", "p_holm", float),
                Column("significant", lambda t: _yes_no(t.significant), "significant", _yes),
                Column("p_holm_se", lambda t: f"{t.p_holm_se:.4f}", "p_holm_se", float),
                Column("borderline", lambda t: _yes_no(t.borderline), "borderline", _yes)]


@dataclass(frozen=True)
class GroupsTable:
    """The rows' letters (best first) and every pair's test; the Markdown shows the letters, the
    CSV both (the pairs below an empty line)."""

    rows: list[GroupRow]
    pairs: list[PairTest] = field(default_factory=list)

    def markdown(self) -> list[str]:
        return markdown_table([c.title for c in GROUP_COLUMNS], ([c.cell(r) for c in GROUP_COLUMNS] for r in self.rows))

    def to_csv(self) -> str:
        return csv_text([[c.title for c in GROUP_COLUMNS], *([c.cell(r) for c in GROUP_COLUMNS] for r in self.rows)],
                        [[c.title for c in PAIR_COLUMNS], *([c.cell(t) for c in PAIR_COLUMNS] for t in self.pairs)])

    @property
    def letters(self) -> dict[str, str]:
        return {r.label: r.letters for r in self.rows}

    @classmethod
    def from_csv(cls, text: str, what: str = "a groups table") -> GroupsTable:
        sections = _sections(text)
        if len(sections) != 2 or not all(sections):
            raise UserError(f"{what}: expected the letters, an empty line and the pairs (remake the tables)")
        (header, *rows), (pair_header, *pairs) = sections
        return cls(_read(GroupRow, GROUP_COLUMNS, header, rows, what),
                   _read(PairTest, PAIR_COLUMNS, pair_header, pairs, what))


@dataclass(frozen=True)
class Hypothesis:
    """One declared hypothesis, row against baseline, tested within its family."""

    row: str
    baseline: str
    seeds: int  # the row's seeds (the fewer of the two rows')
    difference: float  # mean BLEU of row minus baseline's
    low: float  # 95% bootstrap interval of the difference
    high: float
    p: float  # two-sided, uncorrected
    p_holm: float  # Holm-corrected within the family
    significant: bool  # p_holm < the level, as decided when tested
    p_holm_se: float  # p_holm's Monte Carlo standard error (scoring.significance.monte_carlo_se, Holm's multiplier)
    borderline: bool  # p_holm within 3 such errors of the level: another draw of the bootstrap may turn the verdict
    margin: float | None = None  # the family's equivalence margin (BLEU), None: no equivalence test
    p_equivalence: float | None = None  # TOST against +-margin, uncorrected
    p_equivalence_holm: float | None = None  # ... Holm-corrected within the family
    equivalent: bool | None = None  # p_equivalence_holm < the level; None without a margin
    p_equivalence_holm_se: float | None = None  # its Monte Carlo standard error
    equivalence_borderline: bool | None = None  # the equivalence verdict within 3 such errors of the level


def _equivalence(cell: Callable[[Hypothesis], str]) -> Callable[[Hypothesis], str]:
    return lambda t: "" if t.margin is None else cell(t)


FAMILY_COLUMNS = [
    Column("row", lambda t: t.row, "row", str), Column("baseline", lambda t: t.baseline, "baseline", str),
    Column("seeds", lambda t: str(t.seeds), "seeds", int),
    *(Column(name, lambda t, name=name: f"{getattr(t, name):+.2f}", name, float) for name in ("difference", "low", "high")),
    Column("p", lambda t: f"{t.p:.4f}", "p", float), Column("p_holm", lambda t: f"{t.p_holm:.4f}", "p_holm", float),
    Column("significant", lambda t: _yes_no(t.significant), "significant", _yes),
    Column("p_holm_se", lambda t: f"{t.p_holm_se:.4f}", "p_holm_se", float),
    Column("borderline", lambda t: _yes_no(t.borderline), "borderline", _yes),
    Column("margin", _equivalence(lambda t: f"{t.margin:.2f}"), "margin", _optional(float)),
    *(Column(name, _equivalence(lambda t, name=name: f"{getattr(t, name):.4f}"), name, _optional(float))
      for name in ("p_equivalence", "p_equivalence_holm")),
    Column("equivalent", _equivalence(lambda t: _yes_no(t.equivalent)), "equivalent", _optional(_yes)),
    Column("p_equivalence_holm_se", _equivalence(lambda t: f"{t.p_equivalence_holm_se:.4f}"), "p_equivalence_holm_se",
           _optional(float)),
    Column("equivalence_borderline", _equivalence(lambda t: _yes_no(t.equivalence_borderline)),
           "equivalence_borderline", _optional(_yes)),
]


def family_cells(test: Hypothesis) -> dict[str, str]:
    """A hypothesis's cells by field, in ``FAMILY_COLUMNS``' order (the equivalence cells empty
    without a margin)."""
    return {c.name: c.cell(test) for c in FAMILY_COLUMNS}


def shown_family_cells(test: Hypothesis) -> dict[str, str]:
    """``family_cells`` as a Markdown table shows them: each corrected p with its Monte Carlo error
    (``p_holm``, ``p_equivalence_holm``), each verdict marked where it is borderline."""
    c = family_cells(test)
    c["p_holm"] = f"{c['p_holm']} ± {c['p_holm_se']}"
    c["significant"] += " (borderline)" if test.borderline else ""
    if test.margin is not None:
        c["p_equivalence_holm"] = f"{c['p_equivalence_holm']} ± {c['p_equivalence_holm_se']}"
        c["equivalent"] += " (borderline)" if test.equivalence_borderline else ""
    return c


def family_csv(tests: Sequence[Hypothesis]) -> str:
    """The CSV of a family's tested hypotheses, a line each in declaration order."""
    return csv_text([[c.title for c in FAMILY_COLUMNS], *(list(family_cells(t).values()) for t in tests)])


def family_from_csv(text: str, what: str = "a family table") -> list[Hypothesis]:
    """The hypotheses of a family CSV (``family_csv``)."""
    header, *lines = _sections(text)[0]
    return _read(Hypothesis, FAMILY_COLUMNS, header, lines, what)


@dataclass(frozen=True)
class BucketLine:
    """A line of the buckets CSV (``scoring.buckets``): a row's seeds in one source-length bucket."""

    label: str
    bucket: str
    sentences: int
    seeds: int
    bleu: float  # mean over seeds
    low: float  # 95% interval of the mean (bootstrap over seeds x sentences)
    high: float
    chrf: float
    length_ratio: float
    bleu_without_bp: float
    seed_bleus: tuple[float, ...]  # in seed order


BUCKET_COLUMNS = [
    Column("scheme", lambda r: r.label, "label", str), Column("bucket", lambda r: r.bucket, "bucket", str),
    Column("sentences", lambda r: str(r.sentences), "sentences", int), Column("seeds", lambda r: str(r.seeds), "seeds", int),
    *(Column(name, lambda r, name=name: f"{getattr(r, name):.2f}", name, float) for name in ("bleu", "low", "high", "chrf")),
    Column("length_ratio", lambda r: f"{r.length_ratio:.3f}", "length_ratio", float),
    Column("bleu_without_bp", lambda r: f"{r.bleu_without_bp:.2f}", "bleu_without_bp", float),
    Column("seed_bleus", lambda r: ";".join(f"{b:.2f}" for b in r.seed_bleus), "seed_bleus",
           lambda cell: tuple(float(b) for b in cell.split(";"))),
]


def buckets_from_csv(text: str, what: str = "a buckets table") -> list[BucketLine]:
    """The lines of a buckets CSV (``scoring.buckets.write_bucket_tables``)."""
    header, *lines = _sections(text)[0]
    return _read(BucketLine, BUCKET_COLUMNS, header, lines, what)


@dataclass(frozen=True)
class LengthRow:
    """A row of the BLEU-by-length table: a configuration's seeds folded, within and beyond the
    training lengths, and in each source-length bucket."""

    label: str
    seeds: int
    within: MeanStd | None  # None: no test sentence within the training lengths
    beyond: MeanStd | None  # None: no training limit, or no sentence beyond it
    buckets: list[MeanStd]
    interval: tuple[float, float] | None = None  # beyond the limit, against ``LengthTable.baseline``
    p: float | None = None  # None for the baseline, or without a test
    p_se: float | None = None  # p's Monte Carlo standard error
    verdict: str | None = None  # as in the comparison table (``ComparisonRow.verdict``)

    @property
    def borderline(self) -> bool:
        """Whether another draw of the bootstrap may turn the verdict beyond the limit."""
        return "borderline" in (self.verdict or "")


@dataclass(frozen=True)
class LengthTable:
    """BLEU by source length: the rows, the training limit (words; None: no limit), the buckets'
    titles (``3–4 (95)``: words, sentences) and the row the longer sentences are tested against
    (None: no test)."""

    rows: list[LengthRow]
    limit: int | None
    buckets: list[str]
    baseline: str | None = None

    @property
    def columns(self) -> list[Column]:
        limit, tested = self.limit, self.baseline is not None
        columns = [Column("scheme", lambda r: r.label, "label", str), Column("seeds", lambda r: str(r.seeds), "seeds", int),
                   Column(f"BLEU ≤ {limit} words" if limit is not None else "BLEU all",
                          lambda r: "" if r.within is None else str(r.within), "within", _optional(MeanStd.parse)),
                   Column(f"BLEU > {limit} words" if limit is not None else NONE,
                          lambda r: "" if r.beyond is None else str(r.beyond), "beyond", _optional(MeanStd.parse))]
        if tested:
            columns += [Column(f"> {limit}: 95% CI", lambda r: f"[{r.interval[0]:.2f}, {r.interval[1]:.2f}]", "interval",
                               _interval),
                        Column(f"> {limit}: p vs {self.baseline}", lambda r: NONE if r.p is None else f"{r.p:.3f}", "p",
                               _optional(float, NONE)),
                        Column(f"> {limit}: {P_SE}", lambda r: NONE if r.p_se is None else f"{r.p_se:.3f}", "p_se",
                               _optional(float, NONE)),
                        Column(f"> {limit}: significant", lambda r: r.verdict, "verdict", str)]
        return columns + [Column(title, lambda r, j=j: str(r.buckets[j]), f"bucket:{j}", MeanStd.parse)
                          for j, title in enumerate(self.buckets)]

    def markdown(self) -> list[str]:
        columns = self.columns
        return markdown_table([c.title for c in columns], ([c.cell(r) for c in columns] for r in self.rows))

    def to_csv(self) -> str:
        columns = self.columns
        return csv_text([[c.title for c in columns], *([c.cell(r) for c in columns] for r in self.rows)])

    @classmethod
    def from_csv(cls, text: str, what: str = "a BLEU-by-length table") -> LengthTable:
        """The table ``to_csv`` wrote; its limit, buckets and baseline read from the column titles."""
        header, *rows = _first_section(text, what)
        within = header[2] if len(header) > 2 else ""
        limit = int(within.split()[2]) if within.startswith("BLEU ≤ ") else None
        tested = len(header) > 4 and header[4].startswith("> ")
        baseline = header[5].partition(" p vs ")[2] if tested else None
        fixed = len(cls([], limit, [], baseline).columns)  # the columns before the buckets
        table = cls([], limit, header[fixed:], baseline)
        read = _read(dict, table.columns, header, rows, what)
        for row in read:
            row["buckets"] = [row.pop(f"bucket:{j}") for j in range(len(table.buckets))]
        return cls([LengthRow(**row) for row in read], limit, table.buckets, baseline)


@dataclass(frozen=True)
class DeviceCost:
    """A line of an archive's ``cost.md``: the runs trained on one device (``all``: every run), their
    training hours, CPU core-hours or GPU process-hours (None for a total over both, different
    units), and how many of the runs' figures are upper bounds."""

    device: str
    runs: int
    hours: float
    core_hours: float | None
    upper_bounds: int


TOTAL = "all"  # the device cell of the total line
COST_COLUMNS = [
    Column("device", lambda c: c.device, "device", str), Column("runs", lambda c: str(c.runs), "runs", int),
    Column("training hours", lambda c: f"{c.hours:.1f}", "hours", float),
    Column("core-hours (CPU) / process-hours (GPU)", lambda c: NONE if c.core_hours is None else f"{c.core_hours:.1f}",
           "core_hours", _optional(float, NONE)),
    Column("upper bounds", lambda c: str(c.upper_bounds), "upper_bounds", int),
]


@dataclass(frozen=True)
class SchemeCost:
    """A line of the per-scheme costs: the runs of ``scheme`` that shared their machine as ``sharing``
    says (device, threads, runs at once), their mean training seconds per 1,000 updates and its ratio
    to sinusoidal's there (None without a sinusoidal run), their mean decoding speed (sentences/s) and
    peak decoding memory (MB), None where no run recorded them."""

    sharing: str
    scheme: str
    runs: int
    seconds: float
    ratio: float | None
    speed: float | None
    peak: float | None


SCHEME_COST_COLUMNS = [
    Column("shared machine", lambda c: c.sharing, "sharing", str),
    Column("scheme", lambda c: c.scheme, "scheme", str), Column("runs", lambda c: str(c.runs), "runs", int),
    Column("s / 1,000 updates", lambda c: f"{c.seconds:.1f}", "seconds", float),
    Column("× sinusoidal", lambda c: NONE if c.ratio is None else f"{c.ratio:.2f}", "ratio", _optional(float, NONE)),
    Column("decoding sent/s", lambda c: NONE if c.speed is None else f"{c.speed:.1f}", "speed", _optional(float, NONE)),
    Column("peak memory (MB)", lambda c: NONE if c.peak is None else f"{c.peak:.0f}", "peak", _optional(float, NONE)),
]


def cost_markdown(lines: Sequence[DeviceCost]) -> list[str]:
    """The Markdown lines of the cost table (numbers right-aligned)."""
    return markdown_table([c.title for c in COST_COLUMNS], ([c.cell(line) for c in COST_COLUMNS] for line in lines),
                          right=[False, True, True, True, True])


def scheme_cost_markdown(lines: Sequence[SchemeCost]) -> list[str]:
    """The Markdown lines of one way of sharing a machine's per-scheme costs (its column left out:
    the text above the table names it)."""
    columns = SCHEME_COST_COLUMNS[1:]
    return markdown_table([c.title for c in columns], ([c.cell(line) for c in columns] for line in lines),
                          right=[False, *[True] * (len(columns) - 1)])


def cost_csv(lines: Sequence[DeviceCost], schemes: Sequence[SchemeCost]) -> str:
    """CSV of the cost table: the devices' lines, an empty line, the per-scheme lines."""
    return csv_text([[c.title for c in COST_COLUMNS], *([c.cell(line) for c in COST_COLUMNS] for line in lines)],
                    [[c.title for c in SCHEME_COST_COLUMNS],
                     *([c.cell(line) for c in SCHEME_COST_COLUMNS] for line in schemes)])


def cost_from_csv(text: str, what: str = "a cost table") -> tuple[list[DeviceCost], list[SchemeCost]]:
    """The devices' and the schemes' lines of ``cost_csv``'s text."""
    sections = _sections(text)
    if len(sections) != 2 or not all(sections):
        raise UserError(f"{what}: expected the devices, an empty line and the schemes (remake the tables)")
    (header, *lines), (scheme_header, *schemes) = sections
    return (_read(DeviceCost, COST_COLUMNS, header, lines, what),
            _read(SchemeCost, SCHEME_COST_COLUMNS, scheme_header, schemes, what))
