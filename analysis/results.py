"""Pictures of finished runs read from their files: training curves (metrics.jsonl) and BLEU by
source length (eval/<test set>/results.json)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from analysis import pictures
from experiment.run_dir import load_run_config
from utils.errors import UserError


def slug(text: str) -> str:
    """A file-name-safe version of ``text``."""
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", text).strip("-") or "x"


def run_label(run_dir: Path) -> str:
    """The run's folder name, with its scheme in brackets unless the folder is named after it."""
    scheme = load_run_config(run_dir).model.positional.name
    return run_dir.name if run_dir.name == scheme else f"{run_dir.name} ({scheme})"


def read_metrics(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"{run_dir} has no metrics.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


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


def bleu_by_length(run_dirs: list[Path], out: Path, testset: str | None = None, fmt: str = "png") -> Path:
    """BLEU by source length of the runs on ``testset`` (default: each run's last test split)."""
    series, testsets = {}, set()
    for d in map(Path, run_dirs):
        name = testset or load_run_config(d).data.test_splits[-1]
        path = d / "eval" / name / "results.json"
        if not path.is_file():
            raise UserError(f"{d} has no results for '{name}' (run: python test.py --run {d})")
        series[run_label(d)] = json.loads(path.read_text(encoding="utf-8"))["by_length"]
        testsets.add(name)
    stem = slug("bleu_by_length_" + "_".join(sorted(testsets)))
    return pictures.bleu_by_length(series, f"BLEU by source length on {', '.join(sorted(testsets))}",
                                   Path(out) / f"{stem}.{fmt}")
