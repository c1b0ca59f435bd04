"""A positional-encoding comparison end to end: train each scheme, test it, compare, draw.

``python -m utils.experiments demo`` is ``make demo`` (synthetic corpus, tiny model, no network);
``python -m utils.experiments multi30k [--schemes ...] [--seeds ...]`` is
``make reproduce-multi30k``; ``iwslt2017`` the GPU comparison. Finished runs are skipped, so
an interrupted comparison continues where it stopped. Studies with an archive copy each evaluated
run's small files into it (report material) and regenerate ``<archive>/comparison_<test set>.md``
from everything archived, so the table grows across sittings; ``--table`` does only that. Runs
with config overrides on the command line are not archived (the archive holds the study's config).
Everything goes through the same library functions as train.py, test.py and visualize.py.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from utils.cli import run_main, setup_logging
from utils.errors import UserError

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Study:
    """Which configs to train, where, and what to draw."""

    name: str
    config_dir: Path
    schemes: list[str]
    seeds: list[int]
    out: Path
    overrides: list[str] = field(default_factory=list)
    attention_text: str = ""
    archive: Path | None = None  # copy small result files here (report material)


STUDIES = {
    "demo": Study("demo", ROOT / "configs" / "synthetic",
                  # every scheme but the two slowest (xl, deberta), to stay within 15 minutes
                  ["none", "sinusoidal", "learnable", "rope", "alibi", "t5", "shaw", "nezha", "xpos", "fire"],
                  [1], Path("runs/demo"),
                  attention_text="Nous aimons la voiture rouge que le garçon lave."),
    "multi30k": Study("multi30k", ROOT / "configs" / "multi30k",
                      ["sinusoidal", "learnable", "rope", "alibi", "t5"], [1], Path("runs/multi30k"),
                      attention_text="Un homme en chemise bleue joue de la guitare dans la rue.",
                      archive=ROOT / "report" / "multi30k"),
    "iwslt2017": Study("iwslt2017", ROOT / "configs" / "iwslt2017",
                       ["sinusoidal", "learnable", "rope", "alibi", "t5", "shaw", "xl", "deberta", "nezha",
                        "xpos", "fire", "none"], [1], Path("runs/iwslt2017"),
                       attention_text="Je pense que nous devons parler de ce problème aujourd'hui.",
                       archive=ROOT / "report" / "iwslt2017"),
}


def run_dir_of(study: Study, scheme: str, seed: int) -> Path:
    """``<out>/<scheme>`` for seed 1 (every study's default), ``<out>/<scheme>-seed<N>`` otherwise.

    The name depends on the seed alone, not on how many seeds are asked for, so adding seeds to a
    finished study keeps (and archives beside) the runs it already has.
    """
    return study.out / (scheme if seed == 1 else f"{scheme}-seed{seed}")


def finished(run_dir: Path) -> bool:
    manifest = run_dir / "manifest.json"
    return manifest.is_file() and "last_finished" in json.loads(manifest.read_text(encoding="utf-8"))


def evaluated(run_dir: Path) -> bool:
    """Every configured test split has results newer than the best checkpoint."""
    from utils.run_dir import load_run_config

    best = run_dir / "checkpoints" / "best.pt"
    results = [run_dir / "eval" / t / "results.json" for t in load_run_config(run_dir).data.test_splits]
    return best.is_file() and all(r.is_file() and r.stat().st_mtime >= best.stat().st_mtime for r in results)


def check_same_config(run_dir: Path, config: Path, overrides: list[str]) -> None:
    """Refuse to keep or resume a run started from a different config than the study's now.

    Otherwise an edited config (or a run left by an older version of the study) would silently
    be continued with its old settings and end up in the comparison beside the new ones.
    """
    from utils.config import config_hash, load_config
    from utils.run_dir import load_run_config

    if not (run_dir / "config.yaml").is_file():
        return
    wanted, found = config_hash(load_config(config, overrides)), config_hash(load_run_config(run_dir))
    if wanted != found:
        raise UserError(f"{run_dir} was trained with another config than {config} now gives "
                        f"(config hash {found}, expected {wanted}); move or delete {run_dir} to train "
                        f"it again")


def archive_run(run_dir: Path, target: Path) -> None:
    """Copy the small files of a finished, evaluated run (config, manifest, metrics, eval/)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.yaml", "manifest.json", "metrics.jsonl"):
        if (run_dir / name).is_file():
            shutil.copy2(run_dir / name, target / name)
    if (run_dir / "eval").is_dir():
        shutil.copytree(run_dir / "eval", target / "eval", dirs_exist_ok=True)


def archived_runs(study: Study) -> list[Path]:
    """The run folders under the study's archive (it grows across sittings), sorted by name."""
    if study.archive is None or not study.archive.is_dir():
        return []
    return sorted(d for d in study.archive.iterdir() if (d / "config.yaml").is_file())


def write_archive_tables(study: Study) -> list[Path]:
    """Regenerate ``<archive>/comparison_<test set>.md`` (+ CSV) from the archived runs alone."""
    import test as test_cli
    from utils.run_dir import load_run_config

    runs = archived_runs(study)
    if not runs:
        where = study.archive or f"the '{study.name}' study (it keeps no archive)"
        raise UserError(f"no archived runs under {where}; run the study first")
    tables = []
    for testset in load_run_config(runs[0]).data.test_splits:
        tables.append(study.archive / f"comparison_{testset}.md")
        test_cli.main(["--compare", *map(str, runs), "--testset", testset, "--out", str(tables[-1])])
    return tables


def run_study(study: Study, device: str = "cpu") -> Path:
    import test as test_cli
    import train
    import visualize

    started = time.perf_counter()
    run_dirs = []
    for scheme in study.schemes:
        config = study.config_dir / f"{scheme}.yaml"
        if not config.is_file():
            raise UserError(f"no config {config} for scheme '{scheme}'")
        for seed in study.seeds:
            run_dir = run_dir_of(study, scheme, seed)
            run_dirs.append(run_dir)
            check_same_config(run_dir, config, [f"seed={seed}", *study.overrides])
            if finished(run_dir):
                print(f"[{study.name}] {run_dir}: finished earlier, kept", flush=True)
            else:
                t0 = time.perf_counter()
                args = ["--config", str(config), "--run-dir", str(run_dir), f"seed={seed}", *study.overrides]
                if (run_dir / "checkpoints" / "last.pt").is_file():
                    args = ["--resume", str(run_dir), *study.overrides]
                elif run_dir.exists():
                    args.append("--overwrite")
                train.main(args)
                print(f"[{study.name}] {run_dir}: trained in {time.perf_counter() - t0:.0f} s", flush=True)
            if not evaluated(run_dir):
                test_cli.main(["--run", str(run_dir), "--device", device])
            if study.archive is not None:
                archive_run(run_dir, study.archive / run_dir.name)
    from utils.run_dir import load_run_config

    test_splits = load_run_config(run_dirs[0]).data.test_splits
    pictures = study.out / "pictures"
    for testset in test_splits:
        test_cli.main(["--compare", *map(str, run_dirs), "--testset", testset,
                       "--out", str(study.out / f"comparison_{testset}.md")])
        visualize.main(["length", *map(str, run_dirs), "--testset", testset, "--out", str(pictures)])
    visualize.main(["curves", *map(str, run_dirs), "--out", str(pictures)])
    visualize.main(["pe", "all", "--out", str(pictures / "pe")])
    best = max(run_dirs, key=lambda d: json.loads((d / "eval" / test_splits[0] / "results.json").read_text())["bleu"])
    visualize.main(["attention", "--run", str(best), "--text", study.attention_text,
                    "--out", str(pictures / f"attention_{best.name}")])
    tables = [study.out / f"comparison_{t}.md" for t in test_splits]
    if study.archive is not None:
        tables += write_archive_tables(study)
    minutes = (time.perf_counter() - started) / 60
    print(f"\n[{study.name}] done in {minutes:.1f} min. Comparison tables: "
          + ", ".join(map(str, tables)) + f"; pictures: {pictures}")
    return study.out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=sorted(STUDIES))
    parser.add_argument("--schemes", nargs="+", help="override the study's schemes")
    parser.add_argument("--seeds", nargs="+", type=int, help="override the study's seeds")
    parser.add_argument("--out", help="override the output folder")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--table", action="store_true",
                        help="train nothing: regenerate the comparison tables from the study's archive")
    parser.add_argument("overrides", nargs="*", help="config overrides for every run")
    args = parser.parse_intermixed_args(argv)
    setup_logging()
    study = replace(STUDIES[args.study])
    study.schemes = args.schemes or study.schemes
    study.seeds = args.seeds or study.seeds
    study.out = Path(args.out) if args.out else study.out
    study.overrides = list(args.overrides)
    if args.table:
        write_archive_tables(study)
        return
    if study.overrides and study.archive is not None:
        # The archive holds the study's own config only: a variant must not replace a report row.
        print(f"[{study.name}] config overrides given: results stay under {study.out} and are not archived "
              f"in {study.archive}", flush=True)
        study.archive = None
    run_study(study, args.device)


if __name__ == "__main__":
    run_main(main)
