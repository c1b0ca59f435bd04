"""The comparison table across evaluated runs (Markdown + CSV), read from their DIR/eval/ files.

Needs no model: ``test.py --compare`` and the studies' archives (small files only) use it.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import yaml

from experiment.config import config_hash, from_dict
from scoring.metrics import bootstrap_samples, paired_bootstrap_p
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


def _read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


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
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    losses = []
    metrics_path = run_dir / "metrics.jsonl"
    if metrics_path.is_file():
        for line in metrics_path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("kind") == "valid":
                losses.append(record["loss"])
    return EvaluatedRun(run_dir, cfg.model.positional.name, config_hash(cfg), seed, manifest.get("parameters"),
                        min(losses) if losses else None,
                        json.loads((folder / "results.json").read_text(encoding="utf-8")),
                        _read_lines(folder / "hyps.txt"), _read_lines(folder / "refs.txt"))


def _mean_std(values: list[float], digits: int = 2) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def compare(run_dirs: list[Path], testset: str, baseline: Path | None = None) -> tuple[str, str]:
    """Markdown and CSV comparison tables: one row per configuration (seeds folded into mean ± std).

    BLEU carries a 95% bootstrap confidence interval (single runs); p is the paired bootstrap
    p-value of the row's first run against the baseline's first run on the same sentences.
    """
    runs = [load_evaluated(d, testset) for d in run_dirs]
    groups: dict[str, list[EvaluatedRun]] = {}
    for r in runs:
        groups.setdefault(r.group, []).append(r)
    base_runs = (groups[load_evaluated(baseline, testset).group] if baseline is not None
                 else next((g for g in groups.values() if g[0].scheme == "sinusoidal"), next(iter(groups.values()))))
    base = base_runs[0]
    indices = bootstrap_samples(len(base.refs))
    labels = {}
    for key, members in groups.items():
        label = members[0].scheme
        if sum(g[0].scheme == label for g in groups.values()) > 1:
            label = f"{label} ({members[0].run_dir.name})"
        labels[key] = label

    header = ["scheme", "runs", "parameters", "valid loss", "BLEU", "BLEU 95% CI", "chrF", "BLEU-4 (nltk)",
              f"p vs {labels[base.group]}"]
    rows = []
    for key, members in groups.items():
        first = members[0]
        if first.refs != base.refs:
            raise UserError(f"{first.run_dir} and {base.run_dir} were scored on different references for "
                            f"'{testset}'")
        bleus = [m.results["bleu"] for m in members]
        ci = (f"[{first.results['bleu_ci95'][0]:.2f}, {first.results['bleu_ci95'][1]:.2f}]"
              if len(members) == 1 else "")
        losses = [m.valid_loss for m in members if m.valid_loss is not None]
        p = "—" if key == base.group else f"{paired_bootstrap_p(first.hyps, base.hyps, base.refs, indices):.3f}"
        rows.append([labels[key], str(len(members)), f"{first.parameters:,}" if first.parameters else "",
                     _mean_std(losses, 3) if losses else "", _mean_std(bleus), ci,
                     _mean_std([m.results["chrf"] for m in members]),
                     _mean_std([m.results["nltk_bleu4"] for m in members]), p])
    rows.sort(key=lambda r: -float(r[4].split(" ")[0]))
    signature = base.results["signature"]
    md = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    md.append("")
    md.append(f"Test set `{testset}`, {len(base.refs)} sentences, decoding: beam "
              f"{base.results['decode']['beam']}. sacreBLEU signature: `{signature}`. CI: 1000 bootstrap "
              f"resamples; p: paired bootstrap (Koehn 2004), one-sided. Runs that differ only in seed "
              f"are folded into mean ± std (sample std).")
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
