"""A length study at a glance (``{{extrapolation STUDY CONTROL}}``): each trained row of the study (its
evaluation variants aside), grouped by kind of scheme, with its BLEU per declared source-length bucket,
each seed's BLEU on the long test set, the control's BLEU there (the same scheme trained on every
length), its difference from sinusoidal in the declared family, and what decoding to the reference's
length (the oracle variant) adds. Read from the archive: the buckets table (``scoring.buckets``), the
runs' evaluation records, the control's comparison table and the families' CSVs."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from experiment.run_dir import RunDir, load_run_config
from models.positional import KINDS, scheme_kind
from reporting.claims import standing
from reporting.sources import STUDIES, archived_families, archived_run_dirs, read_table, read_text, resolve
from reporting.tables import arithmetic_sentence, baseline_family
from scoring.record import read_record
from scoring.significance import BASELINE, SIGNIFICANCE
from scoring.table_rows import buckets_from_csv
from scoring.table_text import markdown_table
from studies.runs import label_of, variant_of
from utils.errors import UserError

ORACLE = "oracle"  # the variant that decodes each hypothesis to its reference's length (Newman et al. 2020)
AIMED_HALF_WIDTH = 3.0  # BLEU: the length study sized its test sets for bucket intervals within +-3 (configs/synthetic/length.yaml)


@dataclass(frozen=True)
class BucketScore:
    """A row's BLEU in one source-length bucket (mean over seeds), the half-width of its 95% interval
    (bootstrap over seeds x sentences) and its length ratio."""

    bleu: float
    half_width: float
    length_ratio: float


def buckets_file(root: Path, study: str) -> Path:
    """The archive's buckets table over its test sets pooled (``buckets_<a>_<b>.csv``)."""
    path = resolve(root, STUDIES[study].folder) / f"buckets_{'_'.join(STUDIES[study].testsets)}.csv"
    if not path.is_file():
        raise UserError(f"the report needs {path}: declare `buckets` in the study and remake its tables")
    return path


def bucket_scores(root: Path, study: str) -> tuple[list[str], dict[str, dict[str, BucketScore]]]:
    """The buckets in their declared order and, per row label, each bucket's score."""
    path = buckets_file(root, study)
    order: list[str] = []
    scores: dict[str, dict[str, BucketScore]] = {}
    for line in buckets_from_csv(read_text(path), str(path)):
        if line.bucket not in order:
            order.append(line.bucket)
        scores.setdefault(line.label, {})[line.bucket] = BucketScore(line.bleu, (line.high - line.low) / 2,
                                                                     line.length_ratio)
    return order, scores


def seed_scores(root: Path, study: str, testset: str) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Each trained row's BLEU on ``testset`` by seed (in seed order) and its scheme, from the runs' records."""
    by_seed: dict[str, dict[int, float]] = {}
    schemes: dict[str, str] = {}
    for run in archived_run_dirs(root, study):
        if variant_of(run) is not None:
            continue
        config = load_run_config(run)
        by_seed.setdefault(label_of(run), {})[config.seed] = read_record(RunDir(run).evaluation(testset).record).bleu
        schemes[label_of(run)] = config.model.positional.name
    return {label: [bleu for _, bleu in sorted(seeds.items())] for label, seeds in by_seed.items()}, schemes


def oracle_family(root: Path, study: str, testset: str) -> tuple[str, dict[str, float], int]:
    """The declared family testing each row's oracle-length decode against the row: its name, row -> the
    difference, and how many of its hypotheses are significant (Holm)."""
    for name, tests in archived_families(root, study, testset).items():
        if tests and all(t.row == f"{t.baseline}+{ORACLE}" for t in tests):
            return name, {t.baseline: t.difference for t in tests}, sum(t.significant for t in tests)
    raise UserError(f"{STUDIES[study].folder} declares no family of `<row>+{ORACLE}` against `<row>` on {testset}")


def length_summary(root: Path, study: str, control: str) -> tuple[str, str]:
    """The table (Markdown lines) and its caption (module doc); ``control`` is the report's name of the study
    that trained the same schemes on every length."""
    long_set = STUDIES[study].testsets[-1]
    order, buckets = bucket_scores(root, study)
    seeds, schemes = seed_scores(root, study, long_set)
    controls = {row.label: row.bleu for row in read_table(root, control, STUDIES[control].testsets[-1]).rows}
    family = baseline_family(root, study, long_set, BASELINE)
    if family is None:
        raise UserError(f"{STUDIES[study].folder} declares no family against {BASELINE} on {long_set}")
    tests = family[1]
    oracle_name, oracle, oracle_significant = oracle_family(root, study, long_set)
    missing = sorted(label for label in seeds if label not in buckets)
    if missing:
        raise UserError(f"{buckets_file(root, study)} has no row {', '.join(missing)}: remake the study's tables")

    def mean(label: str) -> float:
        return statistics.mean(seeds[label])

    rows = sorted(seeds, key=lambda label: (KINDS.index(scheme_kind(schemes[label])), -mean(label)))
    lines, kind = [], None
    for label in rows:
        test = tests.get(label)
        shown = "—" if test is None else f"{test.difference:+.2f}" + ("*" if test.significant else "") + (
            " (b)" if test.borderline else "")
        first = scheme_kind(schemes[label]) != kind  # a kind's first row names it
        kind = scheme_kind(schemes[label])
        lines.append([(f"**{kind}** " if first else "") + f"`{label}`", *(f"{buckets[label][b].bleu:.1f}" for b in order),
                      f"{mean(label):.1f}", " ".join(f"{s:.1f}" for s in seeds[label]),
                      f"{controls[label].mean:.1f}" if label in controls else "—", shown,
                      f"{oracle[label]:+.2f}" if label in oracle else "—"])
    header = ["row", *(f"{b} words" for b in order), f"`{long_set}`", "by seed", "all lengths",
              f"Δ vs {BASELINE}", f"+ {ORACLE}"]
    table = markdown_table(header, lines, [False, *[True] * (len(header) - 1)])
    folder = STUDIES[study].folder
    buckets_md = buckets_file(root, study).with_suffix(".md").name
    seeds_count = max(len(s) for s in seeds.values())
    widths = [buckets[label][b].half_width for label in rows for b in order]
    within = sum(w <= AIMED_HALF_WIDTH for w in widths)
    caption = (
        f"Every trained row of [{folder}/]({folder}/) ({seeds_count} seeds each) by kind, best on `{long_set}` first. "
        f"BLEU per source-length bucket of the test sets pooled, mean over seeds (each bucket's interval, chrF, length "
        f"ratio and BLEU without brevity penalty: [{buckets_md}]({folder}/{buckets_md})); `{long_set}`, by seed: the "
        f"mean and each seed; all lengths: the scheme trained on every length, on `{long_set}` "
        f"([{STUDIES[control].folder}/]({STUDIES[control].folder}/), mean of its seeds). Δ vs {BASELINE}: family "
        f"`{family[0]}` on `{long_set}`, * corrected p below {SIGNIFICANCE}, (b) borderline; "
        f"{standing(root, study, family[0], long_set)}. + {ORACLE}: decoded to each reference's length, minus as "
        f"decoded (family `{oracle_name}`, {oracle_significant} of {len(oracle)} significant). The test sets were sized "
        f"for bucket intervals within ±{AIMED_HALF_WIDTH:g} BLEU: {within} of these {len(widths)} are, the widest "
        f"±{max(widths):.1f}.")
    arithmetic = arithmetic_sentence(root, study, long_set)
    return "\n".join(table), caption + (f" {arithmetic}" if arithmetic else "")
