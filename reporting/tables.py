"""The one renderer of every table the report and README show: an archived comparison table's rows
cut to the columns a reader uses, with the significance group of each row (``groups_<test
set>.csv``) and its training cost relative to sinusoidal (the archived benchmark), best first."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from reporting.claims import standing
from reporting.sources import (
    KERNELS,
    STUDIES,
    archived_families,
    groups_table_path,
    interaction_of,
    read_bench,
    read_groups,
    read_table,
    read_text,
    resolve,
    table_path,
    trained_on_gpu,
)
from scoring.significance import BORDERLINE_SE, SIGNIFICANCE, borderline_count
from scoring.table_rows import NONE, P_SE, ComparisonTable, Hypothesis, LengthTable, shown_family_cells
from scoring.table_text import markdown_table
from utils.errors import UserError

MONTE_CARLO = (f"{P_SE}: p's Monte Carlo standard error; a verdict marked borderline lies within {BORDERLINE_SE:g} of "
               f"them of {SIGNIFICANCE}, so another draw of the bootstrap may turn it.")  # the shown tables' short note
SHOWN = ["seeds", "bleu", "interval", "chrf++"]  # the archived columns shown, when the table has them


def training_costs(bench: dict | None) -> dict[str, float]:
    """Each scheme's training step time over sinusoidal's, from one benchmark run (same batches,
    models stepped round-robin: ``bench.train_speed``); empty without an archived benchmark."""
    if not bench or "train.sinusoidal.step_ms" not in bench:
        return {}
    base = bench["train.sinusoidal.step_ms"]
    return {key.split(".")[1]: value / base for key, value in bench.items()
            if key.startswith("train.") and key.endswith(".step_ms") and key.split(".")[1] != "torch_nn_transformer"}


def scheme_of(label: str) -> str:
    """The scheme of a row label (``shape (model.positional.shape.max_shift=20)`` -> ``shape``)."""
    return label.split(" (")[0]


def baseline_family(root: Path, study: str, testset: str, baseline: str) -> tuple[str, dict[str, Hypothesis]] | None:
    """The study's declared family that tests rows against ``baseline`` alone (e.g. ``vs-sinusoidal``)
    on ``testset``, as (name, row -> its hypothesis), or None where it declares none."""
    for name, tests in archived_families(root, study, testset).items():
        if tests and all(t.baseline == baseline for t in tests) and interaction_of(study, name) is None:
            return name, {t.row: t for t in tests}
    return None


def comparison_table(root: Path, study: str, testset: str, limit: int | None = None) -> str:
    """The study's archived table for ``testset`` as shown: its first ``limit`` rows (all by default),
    the shown columns, p, its Monte Carlo error and verdict against its baseline (its declared family's
    where it has one), the group letters and the cost column where the archive has groups and the report
    a benchmark; a caption naming the full table."""
    table = read_table(root, study, testset)
    groups = read_groups(root, study, testset)
    # the benchmark's CPU step times say nothing of GPU runs: shown beside CPU studies only
    costs = {} if trained_on_gpu(root, study) else training_costs(read_bench(root))
    family = baseline_family(root, study, testset, table.baseline)
    columns = [key for key in SHOWN if key in table.columns] + ([] if family else ["p", "p_se", "verdict"])
    tested = [f"Δ vs {table.baseline}", "p (Holm) ± MC SE", "significant"] if family else []
    head = ["scheme", *(table.columns[key].title for key in columns), *tested] + (["group"] if groups else []) \
        + (["training time ×"] if costs else [])
    lines = []
    for row in table.rows[:limit]:
        cells = [row.label, *table.cells(row, columns)]
        if family:
            test = family[1].get(row.label)
            shown = shown_family_cells(test) if test else {}
            cells += [shown[key] for key in ("difference", "p_holm", "significant")] if test else [NONE] * 3
        if groups:
            cells.append(groups.letters.get(row.label, ""))
        if costs:
            cost = costs.get(scheme_of(row.label))
            cells.append(f"{cost:.2f}" if cost is not None else "")
        lines.append(cells)
    return "\n".join(markdown_table(head, lines)) + "\n"


def table_standing(root: Path, study: str, family: str | None, testset: str) -> str:
    """The sentence of a table's caption that says whether what it tests is confirmatory or exploratory:
    its baseline family's standing (``reporting.claims.standing``), exploratory where none tests it."""
    if family is None:
        return "Exploratory: no declared family tests this table's rows."
    said = standing(root, study, family, testset)
    if said.startswith("Confirmatory"):
        return f"Confirmatory: family `{family}` was declared before the runs."
    return (f"Exploratory: family `{family}` was named after the runs." if said else
            f"Exploratory: family `{family}` carries no declaration date.")


def table_caption(root: Path, study: str, testset: str, what: str, shown: int | None = None) -> str:
    """What a shown table is (``what``: the study in words), where its whole is, what its runs computed
    on (the archived table's arithmetic sentence, ``scoring.arithmetic``) and what its columns mean."""
    path = table_path(study, testset)
    comparison = read_table(root, study, testset)
    count = len(comparison.rows)
    part = f"the top {shown} of {count} rows" if shown is not None and shown < count else "every row"
    notes = [f"{what[:1].upper()}{what[1:]}; test set `{testset}`, {part} of [{path}]({path}) (all columns, its footnote)."]
    arithmetic = arithmetic_sentence(root, study, testset)
    if arithmetic:
        notes.append(arithmetic)
    family = baseline_family(root, study, testset, comparison.baseline)
    notes.append(table_standing(root, study, family[0] if family else None, testset))
    if family:
        where = f"{STUDIES[study].folder}/family_{family[0]}_{testset}.md"
        notes.append(f"Δ, p (Holm) ± MC SE, significant: the row minus the baseline in the study's declared family "
                     f"`{family[0]}` (two-sided paired bootstrap over seeds × sentences, Holm-corrected within the "
                     f"family, ± the corrected p's Monte Carlo standard error; a verdict within {BORDERLINE_SE:g} of "
                     f"them of {SIGNIFICANCE} is borderline; [{where}]({where})).")
    else:
        notes.append(MONTE_CARLO)
    groups = read_groups(root, study, testset)
    if groups:
        where = groups_table_path(study, testset)
        notes.append(f"Group: rows that share a letter are not shown to differ (every pair tested, Holm-corrected: "
                     f"{sum(t.significant for t in groups.pairs)} of {len(groups.pairs)} pairs differ"
                     f"{borderline_count([t.borderline for t in groups.pairs])}; [{where}]({where})).")
    bench = read_bench(root)
    if training_costs(bench) and not trained_on_gpu(root, study):
        notes.append(f"Training time ×: the scheme's training step time over sinusoidal's on the same batches in a "
                     f"separate benchmark, not these runs' own timing "
                     f"(`make bench`, {bench.get('device', 'device not recorded')}"
                     f"{', ' + bench['cpu'] if bench.get('cpu') else ''}, {bench.get('date', 'date not recorded')}; "
                     f"[report/bench/bench.md](report/bench/bench.md)).")
    return " ".join(notes)


def kernels_table(root: Path) -> str:
    """BLEU of the synthetic study's schemes trained on each CPU kernel set (``report/demo-kernels``):
    a row per scheme, a column per kernel set and test set."""
    folder, sets = KERNELS
    columns, bleu = [], {}
    for kernel in sets:
        for testset in ("test", "test_long"):
            columns.append(f"{kernel} `{testset}`")
            path = resolve(root, folder) / kernel / f"comparison_{testset}.csv"
            for row in ComparisonTable.from_csv(read_text(path), str(path)).rows:
                bleu.setdefault(row.label, {})[columns[-1]] = row.bleu
    order = sorted(bleu, key=lambda s: -bleu[s][columns[0]].mean if columns[0] in bleu[s] else 0.0)
    lines = markdown_table(["scheme", *columns], ([scheme, *(str(bleu[scheme].get(c, "")) for c in columns)]
                                                  for scheme in order))
    return "\n".join(lines) + "\n"


def length_table_file(root: Path, study: str) -> Path:
    """The archive's BLEU-by-length table (``bleu_by_length_*.csv``, written by ``visualize length``)."""
    found = sorted((resolve(root, STUDIES[study].folder)).glob("bleu_by_length_*.csv"))
    if not found:
        raise UserError(f"{STUDIES[study].folder} has no bleu_by_length table (python -m nmt visualize length ...)")
    return found[0]


def length_rows(root: Path, study: str) -> LengthTable:
    """The archive's BLEU-by-length table, its rows best beyond the training lengths first."""
    path = length_table_file(root, study)
    table = LengthTable.from_csv(read_text(path), str(path))
    if table.limit is None:
        raise UserError(f"{path} has no training limit, so no sentence beyond it")
    return replace(table, rows=sorted(table.rows, key=lambda row: -row.beyond.mean))


def lengths_table(root: Path, study: str) -> str:
    """The first columns of the BLEU-by-length table: BLEU within and beyond the training lengths,
    the interval, p, its Monte Carlo error and verdict of the longer sentences against sinusoidal; best beyond first."""
    table = length_rows(root, study)
    columns = [c for c in table.columns if not c.name.startswith("bucket:")]
    lines = markdown_table([c.title for c in columns], ([c.cell(row) for c in columns] for row in table.rows))
    path = f"{STUDIES[study].folder}/{length_table_file(root, study).with_suffix('.md').name}"  # the readable one
    arithmetic = arithmetic_sentence(root, study, STUDIES[study].testsets[0])
    return "\n".join(lines) + (f"\n\nBy source length, both test sets pooled; every bucket in [{path}]({path}). "
                                f"Exploratory: descriptive, no declared family tests it. {MONTE_CARLO}"
                                f"{' ' + arithmetic if arithmetic else ''}\n")


def arithmetic_sentence(root: Path, study: str, testset: str) -> str | None:
    """The archived comparison table's sentence on what its runs computed on (arithmetic, code commits)."""
    table = resolve(root, table_path(study, testset))
    found = re.search(r"Arithmetic(?::| mixed).*$", table.read_text(encoding="utf-8").rstrip()) if table.is_file() else None
    return found.group(0) if found else None
