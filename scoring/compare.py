"""The comparison table across evaluated runs (Markdown + CSV), read from their DIR/eval/ files.

Needs no model: ``test.py --compare`` and the studies' archives (small files only) use it.
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import yaml

from data.parallel_text import read_lines
from experiment.config import from_dict, recipe_hash
from experiment.run_dir import read_manifest, read_metrics_log
from search.settings import decoding_rule
from scoring.metrics import bootstrap_samples, seed_bleu_interval, seed_paired_bootstrap_p
from utils.errors import UserError
from utils.io import atomic_write_text

@dataclass
class EvaluatedRun:
    run_dir: Path
    scheme: str
    group: str  # hash of the config without its seed: runs that differ only in seed share it
    seed: int
    parameters: int | None
    valid_loss: float | None
    results: dict
    hyps: list[str]
    refs: list[str]


def load_evaluated(run_dir: Path, testset: str) -> EvaluatedRun:
    run_dir = Path(run_dir)
    folder = run_dir / "eval" / testset
    if not (folder / "results.json").is_file():
        raise UserError(f"{run_dir} has no results for test set '{testset}' "
                        f"(run: python test.py --run {run_dir})")
    cfg_path = run_dir / "config.yaml"
    if not cfg_path.is_file():
        raise UserError(f"{run_dir} is not a run directory (no config.yaml)")
    cfg = from_dict(yaml.safe_load(cfg_path.read_text(encoding="utf-8")))
    seed = cfg.seed
    cfg.seed = 0
    manifest = read_manifest(run_dir)
    losses = [point["loss"] for point in read_metrics_log(run_dir) if point.get("kind") == "valid"]
    return EvaluatedRun(run_dir, cfg.model.positional.name, recipe_hash(cfg), seed, manifest.get("parameters"),
                        min(losses) if losses else None,
                        json.loads((folder / "results.json").read_text(encoding="utf-8")),
                        read_lines(folder / "hyps.txt"), read_lines(folder / "refs.txt"))


def mean_std(values: list[float], digits: int = 2) -> str:
    """``mean ± sample std`` of per-seed values, or the single value."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


SIGNIFICANCE = 0.05
BASELINE = "sinusoidal"  # the scheme every row is tested against unless another baseline is given


def pooled_std(groups: list[list[float]]) -> float | None:
    """Pooled standard deviation over the groups of several values (square root of the mean of
    their sample variances); None when no group has several."""
    variances = [statistics.variance(g) for g in groups if len(g) > 1]
    return math.sqrt(statistics.mean(variances)) if variances else None


def seed_spread(groups: list[list[EvaluatedRun]]) -> float | None:
    """Pooled standard deviation of BLEU over seeds, from the groups that have several seeds."""
    return pooled_std([[m.results["bleu"] for m in g] for g in groups])


def versus_baseline(system: list[list[str]], baseline: list[list[str]], refs: list[str], indices,
                    bleus: tuple[list[float], list[float]], pooled: float | None) -> tuple[float, str]:
    """p of a system against the baseline (hypotheses per seed, ``seed_paired_bootstrap_p``) and the
    verdict: ``bleus`` are the two sides' BLEU per seed on ``refs``; the seed spread is their larger
    seed std, or ``pooled`` when both have one seed."""
    p = seed_paired_bootstrap_p(system, baseline, refs, indices)
    spreads = [statistics.stdev(b) for b in bleus if len(b) > 1]
    delta = statistics.mean(bleus[0]) - statistics.mean(bleus[1])
    return p, verdict(p, delta, max(spreads) if spreads else pooled)


def verdict(p: float, delta: float, spread: float | None) -> str:
    """"yes" when p < 0.05 and the difference of means exceeds the seed spread; with no seed spread
    measured, p alone decides (test-set sampling only, marked so)."""
    if spread is None:
        return "yes (one seed)" if p < SIGNIFICANCE else "no (one seed)"
    return "yes" if p < SIGNIFICANCE and abs(delta) > spread else "no"


def _flat(tree: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def group_labels(groups: dict[str, tuple[str, Path]]) -> dict[str, str]:
    """Row labels for groups of runs (key -> (scheme, one run's folder)): the scheme, and where two
    groups share it, the config settings (seed and decoding aside) in which each differs from
    the others of its scheme, e.g. ``shape (model.positional.shape.max_shift=20)``."""
    def settings(run_dir: Path) -> dict[str, object]:
        tree = yaml.safe_load((Path(run_dir) / "config.yaml").read_text(encoding="utf-8"))
        tree.pop("seed", None)
        tree.pop("decode", None)
        return _flat(tree)

    schemes = [scheme for scheme, _ in groups.values()]
    shared = {key: settings(d) for key, (scheme, d) in groups.items() if schemes.count(scheme) > 1}
    labels = {}
    for key, (scheme, run_dir) in groups.items():
        if key not in shared:
            labels[key] = scheme
            continue
        mine = shared[key]
        others = [shared[k] for k, (other, _) in groups.items() if other == scheme and k != key]
        differing = [k for k in sorted(set(mine).union(*others)) if any(o.get(k) != mine.get(k) for o in others)]
        # options of other schemes (model.positional.<other>.*) say nothing about this one's runs
        own = [k for k in differing if not (k.startswith("model.positional.") and k.count(".") >= 3
                                            and not k.startswith(f"model.positional.{scheme}."))]
        labels[key] = f"{scheme} ({', '.join(f'{k}={mine.get(k)}' for k in own or differing) or run_dir.name})"
    return labels


def training_precision(run_dir: Path, amp: str) -> str:
    """The arithmetic a run trained in: its manifest's ``precision`` (fp32, bf16, fp16), or for a
    run archived before manifests recorded it, what ``train.amp`` (``amp``) gave on the device its
    manifest names — fp32 on a CPU; on a GPU, ``auto`` meant bf16 on every GPU runs were archived on."""
    manifest = read_manifest(run_dir)
    if "precision" in manifest:
        return manifest["precision"]
    if str(manifest.get("device", "cpu")).startswith("cpu") or amp == "none":
        return "fp32"
    return "fp16" if amp == "fp16" else "bf16"


def check_same_recipe(run_dirs: list[Path]) -> None:
    """Refuse runs whose configs differ in anything but the positional scheme and the seed, or that
    trained in different arithmetic (``train.amp: auto`` is fp32 on a CPU, bf16 on a GPU): a table
    must never mix training recipes. One line naming two runs that differ."""
    recipes: dict[str, Path] = {}
    precisions: dict[str, Path] = {}
    for d in run_dirs:
        cfg = from_dict(yaml.safe_load((Path(d) / "config.yaml").read_text(encoding="utf-8")))
        precisions.setdefault(training_precision(Path(d), cfg.train.amp), Path(d))
        cfg.seed, cfg.model.positional.name = 0, ""
        recipes.setdefault(recipe_hash(cfg), Path(d))
    if len(recipes) > 1:
        first, other = list(recipes.values())[:2]
        raise UserError(f"the runs were trained with different recipes ({first} and {other} differ in more than "
                        f"scheme and seed); a table must not mix them: move the runs of the old recipe aside")
    if len(precisions) > 1:
        (p1, first), (p2, other) = list(precisions.items())[:2]
        raise UserError(f"the runs were trained in different precisions ({first}: {p1}, {other}: {p2}; "
                        f"train.amp: auto is fp32 on a CPU and bf16 on a GPU); a table must not mix them")


def _check_same_decoding(runs: list[EvaluatedRun], testset: str) -> None:
    """Refuse runs decoded with different rules on ``testset`` (one line naming two of them)."""
    rules: dict[str, EvaluatedRun] = {}
    for r in runs:
        rules.setdefault(json.dumps(decoding_rule(r.results["decode"]), sort_keys=True), r)
    if len(rules) > 1:
        (first_rule, first), (other_rule, other) = list(rules.items())[:2]
        raise UserError(f"{first.run_dir} and {other.run_dir} were decoded differently on '{testset}' "
                        f"({first_rule} vs {other_rule}); a table must not mix them: evaluate both with the "
                        f"same settings (test.py --run DIR)")


def _row(label: str, members: list[EvaluatedRun], base_runs: list[EvaluatedRun], indices, pooled: float | None,
         is_base: bool, testset: str) -> list[str]:
    """One table row: a configuration's seeds folded (mean ± std), its interval, and p / verdict
    against the baseline's runs (``—`` for the baseline itself)."""
    first, base = members[0], base_runs[0]
    for m in members:
        if m.refs != base.refs:
            raise UserError(f"{m.run_dir} and {base.run_dir} were scored on different references for '{testset}'")
    bleus = [m.results["bleu"] for m in members]
    if len(members) == 1:
        low, high = first.results["bleu_ci95"]
    else:
        low, high = seed_bleu_interval([m.hyps for m in members], base.refs, indices)
    losses = [m.valid_loss for m in members if m.valid_loss is not None]
    if is_base:
        p, significant = "—", "—"
    else:
        p_value, significant = versus_baseline([m.hyps for m in members], [m.hyps for m in base_runs], base.refs,
                                               indices, (bleus, [m.results["bleu"] for m in base_runs]), pooled)
        p = f"{p_value:.3f}"
    return [label, str(len(members)), f"{first.parameters:,}" if first.parameters else "",
            mean_std(losses, 3) if losses else "", mean_std(bleus), f"[{low:.2f}, {high:.2f}]",
            mean_std([m.results["chrf"] for m in members]), mean_std([m.results["nltk_bleu4"] for m in members]),
            p, significant]


def _footnote(testset: str, base: EvaluatedRun, n_resamples: int, pooled: float | None) -> str:
    """What the table's columns mean: the test set, the decoding, the signature, the statistics."""
    spread_note = (f"the seed spread is the larger seed std of the two rows, or for single-seed rows the pooled "
                   f"seed std of the multi-seed rows ({pooled:.2f} BLEU)" if pooled is not None else
                   "no row has several seeds, so training noise is not measured: the verdict (marked 'one seed') "
                   "accounts for test-set sampling only")
    rule = decoding_rule(base.results["decode"])
    return (f"Test set `{testset}`, {len(base.refs)} sentences, decoding: beam {rule['beam']}, length "
            f"penalty {rule['len_penalty']}, stopping rule {rule['stopping']}. sacreBLEU signature: "
            f"`{base.results['signature']}`. Runs that differ only in "
            f"seed are folded into mean ± std (sample std). CI: {n_resamples} bootstrap resamples of the sentences "
            f"(several seeds: of seeds x sentences, the mean over seeds). p: one-sided paired bootstrap "
            f"(Koehn 2004) over seeds x sentences (Clark et al. 2011). Significant: p < {SIGNIFICANCE} and the "
            f"difference of means larger than the seed spread; {spread_note}.")


def compare(run_dirs: list[Path], testset: str, baseline: Path | None = None) -> tuple[str, str]:
    """Markdown and CSV comparison tables: one row per configuration, seeds folded into mean ± std.

    BLEU carries a 95% interval: for one run the sentence bootstrap of its BLEU, for several seeds
    the two-level (seeds x sentences) bootstrap of their mean. p is the one-sided paired bootstrap
    of the row against the baseline over seeds x sentences (``seed_paired_bootstrap_p``; with one
    seed each, Koehn's paired bootstrap). A difference is called significant only when p < 0.05
    and it is larger than the seed spread (the two rows' larger seed std, or with one seed the
    pooled seed std of the table's multi-seed rows).
    """
    runs = [load_evaluated(d, testset) for d in run_dirs]
    _check_same_decoding(runs, testset)
    groups: dict[str, list[EvaluatedRun]] = {}
    for r in runs:
        groups.setdefault(r.group, []).append(r)
    base_runs = (groups[load_evaluated(baseline, testset).group] if baseline is not None
                 else next((g for g in groups.values() if g[0].scheme == BASELINE), next(iter(groups.values()))))
    base = base_runs[0]
    indices = bootstrap_samples(len(base.refs))
    pooled = seed_spread(list(groups.values()))
    labels = group_labels({key: (members[0].scheme, members[0].run_dir) for key, members in groups.items()})

    header = ["scheme", "seeds", "parameters", "valid loss", "BLEU", "BLEU 95% CI", "chrF", "BLEU-4 (nltk)",
              f"p vs {labels[base.group]}", "significant"]
    rows = [_row(labels[key], members, base_runs, indices, pooled, key == base.group, testset)
            for key, members in groups.items()]
    rows.sort(key=lambda r: -float(r[4].split(" ")[0]))
    md = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    md += ["", _footnote(testset, base, len(indices), pooled)]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows(rows)
    return "\n".join(md) + "\n", buffer.getvalue()


def write_comparison(run_dirs: list[Path], testset: str, out: Path, baseline: Path | None = None) -> tuple[Path, Path]:
    """``compare`` written to ``out`` (Markdown) and ``out`` with suffix .csv; returns both paths."""
    markdown, table_csv = compare(run_dirs, testset, baseline)
    out = Path(out)
    atomic_write_text(out, markdown)
    atomic_write_text(out.with_suffix(".csv"), table_csv)
    return out, out.with_suffix(".csv")
