"""The studies, declared as data: one ``studies/<name>.yaml`` per study, loaded through
``utils.config``'s typed loader (``base:`` inheritance from another study file, ``key=value``
overrides, one-line errors naming the key and the file).

A declaration names the run config (``config``, a path relative to the file that names it), the
rows — ``schemes`` (``all``: every built-in scheme, in registry order, minus ``exclude``; a plugin's scheme is
named beside them, its file in ``plugins``), each a
row labelled by its name, or ``rows``, labelled rows that differ in config — the seeds, the config
overrides every run gets, the output folder, the archive of report material (optional), what the
archive's tables hold, the environment the runs need and where they train::

    config: ../configs/multi30k/base.yaml
    schemes: all                       # and/or rows: {label: {scheme, overrides, seeds}} (beside the schemes)
                                       # a row {pretrained: DIR}: a transformers Marian folder (relative to this
                                       # file) decoded and scored as the study's runs are, never trained
    plugins: [my_pe.py]                # plugin files (relative to this file) whose schemes rows may name
    seeds: [1, 2, 3]
    overrides: [train.max_steps=800]   # every run's config overrides
    out: runs/multi30k
    archive: report/multi30k
    attention_text: Un homme en chemise bleue joue de la guitare dans la rue.
    metrics: [chrf, bleu4-nltk, chrf++, ter]   # the tables' metric columns
    compare: {rope: all, alibi: [fox, dape_alibi]}   # one-to-one tables: comparison_vs_<row>_<test set>
    families:                          # hypotheses declared before the runs, Holm within each family
      vs-sinusoidal: {baseline: sinusoidal, rows: all, declared: 2026-11-27T10:36Z}   # family_<name>_<test set>.md
      papers: {pairs: [fox vs alibi, polar vs rope], declared: 2026-11-27T10:36Z}
      oracle-vs-plain: {variants: [oracle], declared: ...}   # each row+oracle against its own row (all: every variant)
      budget: {interaction: multi30k-short, baseline: sinusoidal, rows: all, declared: ...}   # gap here minus gap there
      close: {pairs: [polar vs rope], margin: 1.0, declared: ...}   # also equivalence within +-1 BLEU (TOST)
    mixed_arithmetic: true             # the tables may mix CPUs, GPUs, torch versions, precisions
    mixed_code: true                   # ... and runs trained at different commits (listed in captions)
    mixed_plugins: true                # ... and runs of two versions of one plugin scheme (listed in captions)
    by_length: true                    # BLEU by source length (bleu_by_length_<test sets>.md and .csv)
    concat: [2, 4, 8]                  # also test on k consecutive sentences joined (<split>_concat<k>)
    buckets: [1-15, 16-20, 21-]        # source-length buckets of the pooled test splits, families in each
    added: {fope-clip: 2026-11-28T17:00Z}   # rows that joined after the families were declared (captions name them)
    eval_variants:                     # the same checkpoints decoded again with a test-time setting: rows <row>+<name>
      oracle: {overrides: [decode.oracle_length=true]}   # rows: all (default, minus exclude: [...]) or a list of rows
    ranked_against: multi30k-short     # this study's order of the schemes beside another's
    preregistration: {declared: ..., primary: [...], secondary: [...],   # endpoints and directional expectations
                      expectations: {source: demo-all, baseline: sinusoidal, test_set: test_long, lead: [xl], trail: [none]}}
    env: {ATEN_CPU_CAPABILITY: avx2}   # environment variables every run needs
    device: cuda                       # where the runs train (default cpu; --device overrides it)
    executor: {name: slurm, timeout_min: 120}   # where the runs train (studies/executor_settings.py)

``out`` and ``archive`` are relative to the repository root. The keys that change what the runs
train (``RECIPE_KEYS``) un-archive a study when the command line changes them; the others (where
and how it runs, what its tables show) do not.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from data.concatenated import concatenated_name
from experiment.config import Config, load_config
from experiment.marian import is_marian_folder
from models.config import prepare_schemes
from models.positional import SCHEMES, builtin_schemes, scheme_parts
from models.positional.plugins import load_installed
from scoring.table_metrics import METRICS
from studies.executor_settings import ExecutorSettings
from utils.config import COMMAND_LINE, load_structured, require, shown
from utils.errors import ConfigError
from utils.paths import ROOT

HERE = Path(__file__).resolve().parent
# what the runs train and are decoded with (see module doc)
RECIPE_KEYS = ("config", "schemes", "exclude", "rows", "plugins", "overrides", "env", "device", "concat", "eval_variants",
               "test_sets")


def unregistered(names: list[str]) -> list[str]:
    """The scheme names (a+b: each part) neither registered nor an installed package's (which joins here)."""
    parts = [part for name in names for part in scheme_parts(str(name))]
    if any(part not in SCHEMES for part in parts):
        load_installed([part for part in parts if part not in SCHEMES])
    return [name for name in names if any(part not in SCHEMES for part in scheme_parts(str(name)))]


@dataclass
class RowDeclaration:
    """A labelled row: a scheme, its own config overrides (after the study's) and seeds (default: the study's);
    or a ``pretrained`` `transformers` Marian folder (sinusoidal; one seed: decoding it is deterministic)."""

    scheme: str = ""
    overrides: list[str] = field(default_factory=list)
    seeds: list[int] | None = None
    pretrained: str = ""

    def __post_init__(self):
        if self.pretrained:
            require(self.scheme in ("", "sinusoidal"), "scheme", "absent beside 'pretrained' (a Marian model is "
                    "sinusoidal)", self.scheme)
            require(self.seeds in (None, [1]), "seeds", "absent beside 'pretrained' (nothing is trained)", self.seeds)
            self.scheme, self.seeds = "sinusoidal", [1]
        require(not unregistered([self.scheme]), "scheme", f"a registered scheme ({', '.join(SCHEMES)})", self.scheme)
        require(self.seeds is None or bool(self.seeds), "seeds", "a non-empty list of integers or null", self.seeds)


@dataclass
class VariantDeclaration:
    """An evaluation variant: config overrides applied to a trained run when it is decoded again
    (``decode.*``, or test-time model settings), and the rows it applies to (``all``: every row but
    those in ``exclude``, the rows whose config refuses the setting)."""

    overrides: list[str] = field(default_factory=list)
    rows: list[str] | Literal["all"] = "all"
    exclude: list[str] = field(default_factory=list)

    def __post_init__(self):
        require(bool(self.overrides) and all("=" in o for o in self.overrides), "overrides",
                "one or more KEY=VALUE config overrides", self.overrides)
        require(self.rows == "all" or not self.exclude, "exclude", "empty unless rows is 'all'", self.exclude)


@dataclass
class FamilyDeclaration:
    """A family of hypotheses tested together: each of ``rows`` (``all``: every other row) against
    ``baseline``, the ``pairs`` written ``row vs baseline``, and for each evaluation variant named in
    ``variants`` (``all``: every one) each ``row+variant`` against its own ``row``. With
    ``interaction`` (another study's name) each hypothesis is a difference in differences: the row's
    gap to its baseline here minus the same gap in that study. With ``margin`` (BLEU) each is also
    tested for equivalence within +-margin (``scoring.families``). ``declared``: when the family was
    declared (ISO 8601, UTC; a date alone counts as the end of that day), which makes it
    confirmatory when that is before the study's first run and exploratory otherwise."""

    baseline: str | None = None
    rows: list[str] | Literal["all"] = field(default_factory=list)
    pairs: list[str] = field(default_factory=list)
    variants: list[str] | Literal["all"] = field(default_factory=list)
    interaction: str | None = None
    margin: float | None = None  # BLEU: each hypothesis also tested for equivalence within +-margin (TOST)
    declared: str = ""

    def __post_init__(self):
        require(self.margin is None or self.margin > 0, "margin", "a positive number of BLEU points (the equivalence "
                "bounds +-margin) or null", self.margin)
        require(declared_at(self.declared) is not None, "declared", "the date (and time, UTC) the family was declared, "
                "ISO 8601 (2026-11-28 or 2026-11-28T09:30Z)", self.declared)
        require(self.interaction is None or not self.variants, "variants", "empty in an interaction family (a "
                "variant's row is compared with its own row within one study)", self.variants)
        require(bool(self.rows) == (self.baseline is not None), "rows",
                "given together with 'baseline' (each row against it)", self.rows)
        require(all(len(p.split(" vs ")) == 2 for p in self.pairs), "pairs", "entries 'ROW vs BASELINE'", self.pairs)
        require(bool(self.rows) or bool(self.pairs) or bool(self.variants), "pairs",
                "a non-empty list, or 'baseline' and 'rows', or 'variants'", self.pairs)


@dataclass
class ExpectationsDeclaration:
    """Directional expectations written before a study's runs: the rows expected to ``lead`` (score
    above) and to ``trail`` (below) ``baseline`` on ``test_set``, drawn from ``source`` (an earlier,
    exploratory study, named so the report can say where each expectation came from)."""

    source: str = ""
    baseline: str = ""
    test_set: str = ""
    lead: list[str] = field(default_factory=list)
    trail: list[str] = field(default_factory=list)

    @property
    def given(self) -> bool:
        return any((self.source, self.baseline, self.test_set, self.lead, self.trail))

    def __post_init__(self):
        if not self.given:
            return
        require(bool(self.source), "source", "the study the expectations were drawn from", self.source)
        require(bool(self.baseline), "baseline", "the row each expectation is relative to", self.baseline)
        require(bool(self.test_set), "test_set", "the test set each expectation is read on", self.test_set)
        both = sorted(set(self.lead) & set(self.trail))
        require(not both, "lead", f"rows not also in 'trail' (both: {', '.join(both)})", self.lead)


@dataclass
class PreregistrationDeclaration:
    """What a study commits to before its first run, beside its families: when (``declared``, ISO 8601
    UTC), its ``primary`` and ``secondary`` endpoints (sentences the report quotes) and its directional
    ``expectations``."""

    declared: str = ""
    primary: list[str] = field(default_factory=list)
    secondary: list[str] = field(default_factory=list)
    expectations: ExpectationsDeclaration = field(default_factory=ExpectationsDeclaration)

    @property
    def given(self) -> bool:
        return any((self.declared, self.primary, self.secondary, self.expectations.given))

    def __post_init__(self):
        if not self.given:
            return
        require(declared_at(self.declared) is not None, "declared", "the date and time (UTC) of the "
                "pre-registration, ISO 8601 (2026-11-29T06:00Z)", self.declared)
        require(bool(self.primary), "primary", "a non-empty list of the primary endpoints", self.primary)


@dataclass
class EvaluationSetsDeclaration:
    """The study's test sets by standing, declared before its runs: its families are confirmatory on
    the ``primary`` sets alone (fresh ones, which no earlier study's results were read on) and tested
    but exploratory on the ``secondary`` ones; every run is tested on both (its ``data.test_splits``:
    primary, then secondary). ``declared``: when (ISO 8601, UTC); ``why``: the reason, which the
    families' captions quote."""

    primary: list[str] = field(default_factory=list)
    secondary: list[str] = field(default_factory=list)
    declared: str = ""
    why: str = ""

    @property
    def given(self) -> bool:
        return any((self.primary, self.secondary, self.declared, self.why))

    def __post_init__(self):
        if not self.given:
            return
        require(bool(self.primary), "primary", "a non-empty list of the test splits the confirmatory tests are "
                "read on", self.primary)
        both = sorted(set(self.primary) & set(self.secondary))
        require(not both, "secondary", f"splits not also primary (both: {', '.join(both)})", self.secondary)
        require(declared_at(self.declared) is not None, "declared", "the date and time (UTC) the test sets were "
                "declared, ISO 8601 (2026-11-29T13:30Z)", self.declared)
        require(bool(self.why.strip()), "why", "a sentence saying why these sets are primary", self.why)


@dataclass(frozen=True)
class EvaluationSets:
    """A study's declared test sets by standing (``EvaluationSetsDeclaration``, resolved)."""

    primary: tuple[str, ...]
    secondary: tuple[str, ...]
    declared: datetime
    why: str

    @property
    def splits(self) -> list[str]:
        """Every run's test splits: the primary sets, then the secondary ones."""
        return [*self.primary, *self.secondary]

    def is_primary(self, testset: str) -> bool:
        """Whether ``testset`` (a split, or one of its k-sentence segments) is a primary set."""
        return re.sub(r"_concat\d+$", "", testset) in self.primary


@dataclass
class ReportDeclaration:
    """How report.md shows the study (``reporting.sources.STUDIES``), read from the study's own file
    only (a study built on another with ``base:`` does not inherit it): ``alias``, the name the
    report's placeholders and directives use for it (``{{short.device}}``; lower-case letters, since a
    reading holds no digit); ``test_sets``, those a reading means (the first, unless it says
    ``second``); ``caption``, what a table's caption says of it (placeholders allowed); ``called``,
    how a claim's clause names the study where it compares two ("the full budget")."""

    alias: str = ""
    test_sets: list[str] = field(default_factory=list)
    caption: str = ""
    called: str = ""

    def __post_init__(self):
        if not self.alias:
            return
        require(re.fullmatch(r"[a-z]+", self.alias) is not None, "alias", "lower-case letters only (readings name "
                "it, and hold no digit)", self.alias)
        require(bool(self.test_sets), "test_sets", "a non-empty list of the test sets a reading means", self.test_sets)
        require(bool(self.caption.strip()), "caption", "what a table's caption says of the study", self.caption)


@dataclass
class StudyDeclaration:
    """A study file as written (module doc); ``load_study`` resolves it into a ``Study``."""

    config: str = ""
    schemes: list[str] | Literal["all"] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    rows: dict[str, RowDeclaration] = field(default_factory=dict)
    plugins: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    out: str = ""
    archive: str | None = None
    attention_text: str = ""
    ranked_against: str | None = None
    metrics: list[str] | None = None
    compare: dict[str, list[str] | Literal["all"]] = field(default_factory=dict)
    by_length: bool = False
    families: dict[str, FamilyDeclaration] = field(default_factory=dict)
    eval_variants: dict[str, VariantDeclaration] = field(default_factory=dict)
    mixed_arithmetic: bool = False
    mixed_code: bool = False
    mixed_plugins: bool = False
    concat: list[int] = field(default_factory=list)
    buckets: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    device: str = "cpu"
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)
    # rows that joined the study after its families were declared: label -> when (ISO 8601, UTC); their
    # families' captions name them, since each such row changes Holm's m of a family declared without it
    added: dict[str, str] = field(default_factory=dict)
    preregistration: PreregistrationDeclaration = field(default_factory=PreregistrationDeclaration)
    test_sets: EvaluationSetsDeclaration = field(default_factory=EvaluationSetsDeclaration)
    report: ReportDeclaration = field(default_factory=ReportDeclaration)

    def __post_init__(self):
        bad = [label for label, when in self.added.items() if declared_at(when) is None]
        require(not bad, "added", f"ISO 8601 times of when each row was added (not: {', '.join(bad)})", self.added)
        for key in ("schemes", "exclude"):
            names = [] if getattr(self, key) == "all" else getattr(self, key)
            unknown = unregistered(names)
            require(not unknown, key, f"registered scheme names (unknown: {', '.join(unknown)}; known: "
                    f"{', '.join(SCHEMES)})", getattr(self, key))
        unknown = [m for m in self.metrics or [] if m not in METRICS]
        require(not unknown, "metrics", f"metric names ({', '.join(METRICS)})", self.metrics)
        clash = [label for label in self.rows if self.schemes == "all" and label in builtin_schemes()
                 or label in self.schemes]
        require(not clash, "rows", f"labels other than the schemes' names (given twice: {', '.join(clash)})", self.rows)
        bad = [name for name in self.eval_variants if not re.fullmatch(r"[a-z0-9_]+", name)]
        require(not bad, "eval_variants", f"names of lower-case letters, digits and _ (not {', '.join(bad)})",
                list(self.eval_variants))
        require(all(k >= 2 for k in self.concat), "concat", "group sizes of at least 2 (1 is the test set itself)",
                self.concat)
        require(all(re.fullmatch(r"\d+-\d*", b) for b in self.buckets), "buckets",
                "source-length buckets LOW-HIGH or LOW- (words)", self.buckets)


@dataclass(frozen=True)
class Row:
    """One row of a study: its label (the run folders' name), scheme, config overrides and seeds (None: the
    study's); ``pretrained``: the Marian folder it decodes instead of training (``RowDeclaration``)."""

    label: str
    scheme: str
    overrides: tuple[str, ...] = ()
    seeds: tuple[int, ...] | None = None
    pretrained: Path | None = None


@dataclass(frozen=True)
class Variant:
    """An evaluation variant of a study (``VariantDeclaration`` resolved): the config overrides a
    trained run is decoded again with, and the rows it applies to, in the study's order."""

    name: str
    overrides: tuple[str, ...]
    rows: tuple[str, ...]


@dataclass(frozen=True)
class Family:
    """A family of hypotheses tested together (``FamilyDeclaration`` resolved): its (row, baseline)
    ``pairs`` in declared order, when it was ``declared`` (UTC), the other study of an interaction
    family (``interaction``; None: tested on this study's runs alone), and its equivalence ``margin``
    (BLEU; None: no equivalence test)."""

    name: str
    pairs: tuple[tuple[str, str], ...]
    declared: datetime
    interaction: str | None = None
    margin: float | None = None


@dataclass(frozen=True)
class Declaration:
    """A time a study file states (a family's, the pre-registration's, the test sets' ``declared``):
    ``key`` the section it dates (``families.<name>``, ``preregistration``, ``test_sets``), ``when``
    (UTC), and ``source`` the file that wrote it (None: the command line), whose history must hold
    the section by then (``studies.declarations``)."""

    key: str
    when: datetime
    source: Path | None


@dataclass(kw_only=True)
class Study:
    """Which rows (``schemes``: their labels; a plain scheme's label is its name) and seeds to train
    from which base config, where, what the archive's tables hold and where the runs train."""

    name: str
    base_config: Path
    schemes: list[str]
    seeds: list[int]
    out: Path
    overrides: list[str] = field(default_factory=list)
    attention_text: str = ""
    archive: Path | None = None  # copy small result files here (report material)
    ranked_against: str | None = None  # another study: its archive's ranking is set beside this one's
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)  # where the runs train
    metrics: list[str] | None = None  # the tables' metric columns (scoring.table_metrics; None: the default)
    rows: dict[str, Row] = field(default_factory=dict)  # labelled rows; a label not here is a plain scheme
    compare: dict[str, list[str] | str] = field(default_factory=dict)  # baseline label -> its rows, or "all"
    by_length: bool = False  # the archive holds the BLEU-by-source-length table
    env: dict[str, str] = field(default_factory=dict)  # environment variables every run needs
    device: str = "cpu"  # where the runs train unless the command line says (--device)
    families: dict[str, Family] = field(default_factory=dict)  # by name, in declared order
    mixed_arithmetic: bool = False  # the tables may mix arithmetic (scoring.arithmetic), listed in captions
    concat: list[int] = field(default_factory=list)  # test also on k-sentence segments (data.concatenated)
    buckets: list[str] = field(default_factory=list)  # source-length buckets of the pooled splits (scoring.buckets)
    variants: dict[str, Variant] = field(default_factory=dict)  # the evaluation variants by name, in declared order
    mixed_code: bool = False  # the tables may mix runs trained at different commits (scoring.arithmetic)
    added: dict[str, datetime] = field(default_factory=dict)  # row label -> when it joined the study (UTC)
    preregistration: PreregistrationDeclaration | None = None  # endpoints and expectations, declared before the runs
    plugins: list[str] = field(default_factory=list)  # plugin files (absolute) every run's config names
    mixed_plugins: bool = False  # the tables may mix versions of one plugin scheme (scoring.arithmetic)
    test_standing: EvaluationSets | None = None  # primary and secondary test sets, declared before the runs
    report: ReportDeclaration | None = None  # how report.md shows it (its file's own report: section)
    declarations: tuple[Declaration, ...] = ()  # every time the study file states, with the file that states it

    @property
    def mixing(self) -> frozenset[str]:
        """What the study's tables may mix (``scoring.arithmetic.Allowance``): "arithmetic", "code", "plugins"."""
        return frozenset(name for name, allowed in (("arithmetic", self.mixed_arithmetic), ("code", self.mixed_code),
                                                    ("plugins", self.mixed_plugins))
                         if allowed)

    def own_families(self) -> list[Family]:
        """The families tested on this study's runs alone (not the interactions with another study)."""
        return [family for family in self.families.values() if family.interaction is None]

    def other_studies(self) -> list[str]:
        """The other studies the tables read, by name: each interaction family's, and ``ranked_against``."""
        return sorted({*(family.interaction for family in self.families.values() if family.interaction),
                       *([self.ranked_against] if self.ranked_against else [])})

    def variants_of(self, label: str) -> list[str]:
        """The evaluation variants that apply to a row, in declared order."""
        return [name for name, variant in self.variants.items() if label in variant.rows]

    def variant_config(self, label: str, seed: int, variant: str) -> Config:
        """The config a run is decoded with under ``variant``: the run's, with the variant's overrides."""
        row = self.row(label)
        return load_config(self.base_config, [f"model.positional.name={row.scheme}", f"seed={seed}", *self.overrides,
                                              *self._declared_overrides(), *row.overrides, *self.variants[variant].overrides])

    def test_sets(self, splits: list[str]) -> list[str]:
        """The test sets of the study's runs: their test ``splits``, then each split's k-sentence
        segments for each k of ``concat``."""
        return [*splits, *(concatenated_name(split, k) for split in splits for k in self.concat)]

    def absolute(self) -> Study:
        """The study with absolute output and archive folders (for jobs that start elsewhere)."""
        return replace(self, out=self.out.absolute(), archive=self.archive.absolute() if self.archive else None)

    def row(self, label: str) -> Row:
        return self.rows.get(label) or Row(label, label)

    def seeds_of(self, label: str) -> list[int]:
        """The seeds of one row: its own, else the study's."""
        row = self.row(label)
        return list(row.seeds) if row.seeds is not None else list(self.seeds)

    def config(self, label: str, seed: int) -> Config:
        """The resolved config of one run (unknown scheme names are a one-line config error)."""
        row = self.row(label)
        return load_config(self.base_config, [f"model.positional.name={row.scheme}", f"seed={seed}", *self.overrides,
                                              *self._declared_overrides(), *row.overrides])

    def _declared_overrides(self) -> list[str]:
        """What the study's own keys set in every run's config: its plugin files as
        ``model.positional.plugins`` and its declared test sets as ``data.test_splits`` (none: the config's)."""
        plugins = [f"model.positional.plugins={json.dumps(self.plugins)}"] if self.plugins else []
        tests = [f"data.test_splits={json.dumps(self.test_standing.splits)}"] if self.test_standing else []
        return plugins + tests


def _resolve(origin: dict[str, str], key: str, value: str, path: Path) -> Path:
    """``value`` of ``key``, a path relative to the file that set it (the root when set on the command line)."""
    source = origin.get(key, str(path))
    return (ROOT if source == COMMAND_LINE else Path(source).parent) / value


def _register_plugins(path: Path) -> Callable[[dict, dict[str, str], str], None]:
    """``load_structured``'s ``prepare`` for the study file ``path``: its plugin files made absolute (relative
    to the file that named them) and registered before the declaration checks its scheme names."""
    def prepare(tree: dict, origin: dict[str, str], default_source: str) -> None:
        files = tree.get("plugins") or []
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            return  # the schema check says what it must be
        resolved = [_resolve(origin, "plugins", f, path).resolve() for f in files]
        missing = [f for f, p in zip(files, resolved, strict=True) if not p.is_file()]
        if missing:
            raise ConfigError(f"{shown(origin.get('plugins', str(path)))}: 'plugins' names {missing[0]}, which is not "
                              "a file")
        tree["plugins"] = [str(p) for p in resolved]
        prepare_schemes(resolved, [])  # an installed package's scheme joins when a row names it (``unregistered``)
    return prepare


def _pretrained(path: Path, origin: dict[str, str], label: str, folder: str) -> Path | None:
    """A row's ``pretrained`` folder, absolute (relative to the file that named it); one that is not a
    Marian folder is one line. (It need not exist until the study runs: a folder downloaded later.)"""
    if not folder:
        return None
    resolved = _resolve(origin, f"rows.{label}.pretrained", folder, path).resolve()
    if resolved.exists() and not is_marian_folder(resolved):
        raise ConfigError(f"{path}: 'rows.{label}.pretrained' names {folder}, which holds no transformers Marian model")
    return resolved


def _set_here(origin: dict[str, str], key: str, path: Path) -> bool:
    """The dotted ``key`` was set by the file ``path`` itself (not a ``base:`` parent, nor the command line)."""
    return key in origin and origin[key] != COMMAND_LINE and Path(origin[key]).resolve() == path.resolve()


def _preregistration(path: Path, declared: StudyDeclaration, labels: list[str]) -> PreregistrationDeclaration | None:
    """The study's pre-registration, where it gives one; its expectations must name rows of the study."""
    expectations = declared.preregistration.expectations
    if expectations.given:
        unknown = [r for r in [expectations.baseline, *expectations.lead, *expectations.trail] if r not in labels]
        if unknown:
            raise ConfigError(f"{path}: 'preregistration.expectations' names {', '.join(unknown)}, not rows of the "
                              f"study (rows: {', '.join(labels)})")
    return declared.preregistration if declared.preregistration.given else None


def _report_view(path: Path, declared: StudyDeclaration, origin: dict[str, str]) -> ReportDeclaration | None:
    """The study's ``report:`` section where its own file gives one (one inherited through ``base:`` would show
    two studies under one alias); it needs the study's archive."""
    report = declared.report if declared.report.alias and _set_here(origin, "report.alias", path) else None
    if report is not None and not declared.archive:
        raise ConfigError(f"{path}: 'report' shows the study in report.md and needs its 'archive'")
    return report


def load_study(path: Path, overrides: list[str] | None = None) -> Study:
    """The study declared in ``path`` (its name is the file's stem), with ``overrides`` (``key=value``
    of the study's own keys, e.g. ``executor.name=slurm``) applied; its plugins registered."""
    path = Path(path)
    origin: dict[str, str] = {}
    declared = load_structured(StudyDeclaration, path, overrides, origin, prepare=_register_plugins(path))
    for key in ("config", "seeds", "out"):
        if not getattr(declared, key):
            raise ConfigError(f"{path}: missing key '{key}' (a study names its run config, seeds and out folder)")
    if not (declared.schemes or declared.rows):
        raise ConfigError(f"{path}: missing key 'schemes' (or 'rows')")
    base = _resolve(origin, "config", declared.config, path).resolve()
    if not base.is_file():
        raise ConfigError(f"{path}: 'config' names {declared.config}, which is not a file")
    if declared.ranked_against is not None and not declared.archive:
        raise ConfigError(f"{path}: 'ranked_against' names another study and needs this study's 'archive'")
    rows = {label: Row(label, r.scheme, tuple(r.overrides), tuple(r.seeds) if r.seeds else None,
                       _pretrained(path, origin, label, r.pretrained))
            for label, r in declared.rows.items()}
    labels = [s for s in (builtin_schemes() if declared.schemes == "all" else declared.schemes)
              if s not in declared.exclude] + list(rows)
    variants = {}
    for name, variant in declared.eval_variants.items():
        members = [label for label in labels if label not in variant.exclude] if variant.rows == "all" else variant.rows
        unknown = [label for label in [*members, *variant.exclude] if label not in labels]
        if unknown:
            raise ConfigError(f"{path}: 'eval_variants.{name}' names {', '.join(unknown)}, not rows of the study "
                              f"(rows: {', '.join(labels)})")
        variants[name] = Variant(name, tuple(variant.overrides), tuple(members))
    variant_rows = [f"{label}+{name}" for name, variant in variants.items() for label in variant.rows]
    unknown = [label for label in declared.added if label not in labels]
    if unknown:
        raise ConfigError(f"{path}: 'added' names {', '.join(unknown)}, not rows of the study (rows: {', '.join(labels)})")
    for baseline, members in declared.compare.items():
        unknown = [n for n in [baseline, *([] if members == "all" else members)] if n not in labels]
        if unknown:
            raise ConfigError(f"{path}: 'compare.{baseline}' names {', '.join(unknown)}, not rows of the study "
                              f"(rows: {', '.join(labels)})")
    families = {name: Family(name, _family_pairs(path, name, family, labels + variant_rows, variants),
                             declared_at(family.declared), family.interaction, family.margin)
                for name, family in declared.families.items()}
    preregistration = _preregistration(path, declared, labels)
    return Study(
        name=path.stem, base_config=base, schemes=labels, seeds=list(declared.seeds), out=Path(declared.out),
        overrides=list(declared.overrides), attention_text=declared.attention_text,
        archive=ROOT / declared.archive if declared.archive else None, ranked_against=declared.ranked_against,
        executor=declared.executor, metrics=declared.metrics, rows=rows, compare=dict(declared.compare),
        by_length=declared.by_length, env=dict(declared.env), device=declared.device, families=families,
        mixed_arithmetic=declared.mixed_arithmetic, concat=list(dict.fromkeys(declared.concat)),
        buckets=list(declared.buckets), variants=variants,
        mixed_code=declared.mixed_code, added={label: declared_at(when) for label, when in declared.added.items()},
        preregistration=preregistration, plugins=list(declared.plugins), mixed_plugins=declared.mixed_plugins,
        test_standing=_test_sets(declared.test_sets), report=_report_view(path, declared, origin),
        declarations=_declarations(declared, origin))


def _declarations(declared: StudyDeclaration, origin: dict[str, str]) -> tuple[Declaration, ...]:
    """The times the study's files state, each with the file that states it (``Declaration``)."""
    stated = [(f"families.{name}", family.declared) for name, family in declared.families.items()]
    stated += [(key, section.declared) for key, section in (("preregistration", declared.preregistration),
                                                             ("test_sets", declared.test_sets)) if section.given]
    return tuple(Declaration(key, declared_at(when), _stated_in(origin, f"{key}.declared")) for key, when in stated)


def _stated_in(origin: dict[str, str], key: str) -> Path | None:
    source = origin.get(key)
    return Path(source).resolve() if source and source != COMMAND_LINE else None


def _test_sets(declared: EvaluationSetsDeclaration) -> EvaluationSets | None:
    """The declared test sets, resolved (None where the study declares none: every set confirmatory)."""
    if not declared.given:
        return None
    return EvaluationSets(tuple(declared.primary), tuple(declared.secondary), declared_at(declared.declared),
                    " ".join(declared.why.split()))


def _family_pairs(path: Path, name: str, family: FamilyDeclaration, labels: list[str],
                  variants: dict[str, Variant]) -> tuple[tuple[str, str], ...]:
    """A family's hypotheses as (row, baseline) pairs, in declaration order; a label that is not a
    row of the study (or a variant not declared), or a pair given twice, is a one-line error."""
    pairs: list[tuple[str, str]] = []
    if family.baseline is not None:
        members = [label for label in labels if label != family.baseline] if family.rows == "all" else family.rows
        pairs += [(row, family.baseline) for row in members]
    pairs += [tuple(part.strip() for part in pair.split(" vs ")) for pair in family.pairs]
    unknown = [v for v in ([] if family.variants == "all" else family.variants) if v not in variants]
    if unknown:
        raise ConfigError(f"{path}: 'families.{name}.variants' names {unknown[0]!r}, not an evaluation variant of "
                          f"the study (eval_variants: {', '.join(variants) or 'none'})")
    for variant in variants if family.variants == "all" else family.variants:
        pairs += [(f"{row}+{variant}", row) for row in variants[variant].rows]
    unknown = [label for pair in pairs for label in pair if label not in labels]
    if unknown:
        raise ConfigError(f"{path}: 'families.{name}' names {unknown[0]!r}, not a row of the study "
                          f"(rows: {', '.join(labels)})")
    twice = next((pair for i, pair in enumerate(pairs) if pair in pairs[:i] or pair[::-1] in pairs[:i]), None)
    if twice is not None or any(a == b for a, b in pairs):
        bad = twice or next(pair for pair in pairs if pair[0] == pair[1])
        raise ConfigError(f"{path}: 'families.{name}' tests {bad[0]} vs {bad[1]} twice or against itself")
    return tuple(pairs)


def declared_at(text: str) -> datetime | None:
    """A family's ``declared`` as a UTC time, None when it is not ISO 8601: a date alone is the end of
    that day (a family declared the day its study first ran is not taken for declared before it)."""
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(text)):
        moment += timedelta(days=1, microseconds=-1)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def load_studies(folder: Path = HERE) -> dict[str, Study]:
    """Every ``*.yaml`` study declaration in ``folder``, by name (a ``ranked_against`` naming no
    study of the folder is a one-line error; one naming a study whose archive is absent is not: the
    ranking is then skipped)."""
    studies = {path.stem: load_study(path) for path in sorted(Path(folder).glob("*.yaml"))}
    for name, study in studies.items():
        for family, other in ((f.name, f.interaction) for f in study.families.values() if f.interaction):
            if other not in studies or other == name:
                raise ConfigError(f"{Path(folder) / name}.yaml: 'families.{family}.interaction' names {other!r}, not "
                                  f"another declared study (studies: {', '.join(studies)})")
    for name, study in studies.items():
        other = studies.get(study.ranked_against) if study.ranked_against else None
        if study.ranked_against and (other is None or other.archive is None):
            raise ConfigError(f"{Path(folder) / name}.yaml: 'ranked_against' names {study.ranked_against!r}, which is "
                              f"not a study with an archive (studies with one: "
                              f"{', '.join(n for n, s in studies.items() if s.archive) or 'none'})")
    return studies
