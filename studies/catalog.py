"""The studies, declared as data: one ``studies/<name>.yaml`` per study.

A declaration names the base config (a path relative to the file), the schemes (``all``: every
registered scheme, in registry order, minus ``exclude``), the seeds, the output folder, the
archive of report material (optional) and the sentence whose attention is drawn::

    base: ../configs/multi30k/base.yaml
    schemes: all
    seeds: [1]
    out: runs/multi30k
    archive: report/multi30k
    attention_text: Un homme en chemise bleue joue de la guitare dans la rue.
    ranked_against: multi30k-short   # optional: this study's order of the schemes beside another's
    executor: {name: slurm, timeout_min: 120}   # optional: where the runs train (studies/executor.py)

``out`` and ``archive`` are relative to the repository root. A bad declaration is one line
naming the file and the key.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from experiment.config import Config, load_config
from models.positional import SCHEMES
from studies.executor import ExecutorSettings, parse_executor
from utils.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
KEYS = {"base", "schemes", "exclude", "seeds", "out", "archive", "attention_text", "ranked_against", "executor"}
REQUIRED = {"base", "schemes", "seeds", "out"}


@dataclass
class Study:
    """Which schemes and seeds to train from which base config, where, and what to draw."""

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

    def config(self, scheme: str, seed: int) -> Config:
        """The resolved config of one run (unknown scheme names are a one-line config error)."""
        return load_config(self.base_config, [f"model.positional.name={scheme}", f"seed={seed}", *self.overrides])


def _names(value, path: Path, key: str) -> list[str]:
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise ConfigError(f"{path}: '{key}' must be a list of scheme names, got {value!r}")
    unknown = [v for v in value if v not in SCHEMES]
    if unknown:
        raise ConfigError(f"{path}: '{key}' names unknown scheme(s) {', '.join(unknown)} (known: {', '.join(SCHEMES)})")
    return list(value)


def load_study(path: Path) -> Study:
    """The study declared in ``path`` (its name is the file's stem)."""
    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"{path}: cannot read the study declaration ({str(err).splitlines()[0]})") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: a study declaration is a mapping of {', '.join(sorted(KEYS))}")
    unknown, missing = sorted(set(tree) - KEYS), sorted(REQUIRED - set(tree))
    if unknown or missing:
        what = f"unknown key '{unknown[0]}'" if unknown else f"missing key '{missing[0]}'"
        raise ConfigError(f"{path}: {what} (keys: {', '.join(sorted(KEYS))})")
    schemes = list(SCHEMES) if tree["schemes"] == "all" else _names(tree["schemes"], path, "schemes")
    excluded = _names(tree.get("exclude", []), path, "exclude")
    seeds = tree["seeds"]
    if not (isinstance(seeds, list) and seeds and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
        raise ConfigError(f"{path}: 'seeds' must be a non-empty list of integers, got {seeds!r}")
    ranked_against = tree.get("ranked_against")
    if ranked_against is not None and not (isinstance(ranked_against, str) and tree.get("archive")):
        raise ConfigError(f"{path}: 'ranked_against' names another study (a string) and needs this study's "
                          f"'archive', got {ranked_against!r}")
    base = (path.parent / tree["base"]).resolve()
    if not base.is_file():
        raise ConfigError(f"{path}: 'base' names {tree['base']}, which is not a file")
    return Study(path.stem, base, [s for s in schemes if s not in excluded], seeds, Path(tree["out"]),
                 attention_text=str(tree.get("attention_text", "")),
                 archive=ROOT / tree["archive"] if tree.get("archive") else None, ranked_against=ranked_against,
                 executor=parse_executor(tree.get("executor"), path))


def load_studies(folder: Path = HERE) -> dict[str, Study]:
    """Every ``*.yaml`` study declaration in ``folder``, by name (a ``ranked_against`` naming no
    archived study of the folder is a one-line error)."""
    studies = {path.stem: load_study(path) for path in sorted(Path(folder).glob("*.yaml"))}
    for name, study in studies.items():
        other = studies.get(study.ranked_against) if study.ranked_against else None
        if study.ranked_against and (other is None or other.archive is None):
            raise ConfigError(f"{Path(folder) / name}.yaml: 'ranked_against' names {study.ranked_against!r}, which is "
                              f"not a study with an archive (studies with one: "
                              f"{', '.join(n for n, s in studies.items() if s.archive) or 'none'})")
    return studies
