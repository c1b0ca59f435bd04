"""The run directory: everything needed to reproduce or reuse a run.

```
DIR/config.yaml        resolved config (what --resume, test.py and inference.py reload)
DIR/plugins/           copies of the plugin files it names (models/positional/plugins.py), relative to it
DIR/manifest.json      git commit, package versions, device, CPU model and kernels, threads, config hash,
                       data fingerprint, seed, times, training wall time (all sessions)
DIR/tokenizer/         the tokenizer (reloadable offline)
DIR/checkpoints/       last.pt, best.pt, step_<N>.pt (last k), avg.pt
DIR/logs/              TensorBoard event files
DIR/metrics.jsonl      one JSON object per logged point (train and validation)
DIR/eval/<test set>/   results.json (``scoring.record.EvalRecord``), hyps.txt, refs.txt, srcs.txt from test.py
```

A study's archive (``report/<archive>/``) keeps the small files of each run and stores each test set
once (``ArchiveDir``):

```
ARCHIVE/testsets/<test set>.<tag>.src|.ref   each plain test set's sources and references, once; <tag>:
                                             the first hex digits of their checksums (``scoring.texts``)
ARCHIVE/<run>/config.yaml, manifest.json, metrics.jsonl (and plugins/ where the run has them)
ARCHIVE/<run>/eval/<test set>/results.json   the record, naming its texts' checksums
ARCHIVE/<run>/eval/<test set>/hyps.txt.gz    the hypotheses (gzip, no time stamp: the same bytes each time)
```

Joined test sets (``<split>_concat<k>``, ``data.concatenated``) are never stored: they are rebuilt
from the stored set and checked against the record's checksums. ``RunDir`` and ``ArchiveDir`` name
every one of these paths, and no other module spells a file name of a run
(``tests/experiment/test_run_dir.py`` holds the list and searches the code for it).
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from experiment.config import Config, dump_config, from_dict, load_config, own_tree
from utils.errors import UserError
from utils.io import atomic_write_text

# A saved config is read once per run by every table, report and queue check (~900 archived runs): libyaml's
# parser where PyYAML was built with it (~10x the pure-Python one), the same safe constructors either way.
CONFIG_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class EvalFiles:
    """DIR/eval/<test set>/: what one evaluation wrote."""

    folder: Path

    @property
    def record(self) -> Path:
        """The evaluation record (``scoring.record``)."""
        return self.folder / "results.json"

    @property
    def hypotheses(self) -> Path:
        return self.folder / "hyps.txt"

    @property
    def references(self) -> Path:
        return self.folder / "refs.txt"

    @property
    def compressed_hypotheses(self) -> Path:
        """The hypotheses as an archive keeps them (gzip)."""
        return self.folder / "hyps.txt.gz"

    @property
    def sources(self) -> Path:
        return self.folder / "srcs.txt"

    @property
    def holds_test_set(self) -> bool:
        """Whether the folder keeps its own copy of the sources or references (a run's own
        evaluation; in an archive, the old layout)."""
        return self.sources.is_file() or self.references.is_file()


@dataclass(frozen=True)
class RunDir:
    """The paths of one run directory (module doc)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def plugins(self) -> Path:
        """DIR/plugins/: copies of the plugin files the run's config names (which names them relative to itself)."""
        return self.path / "plugins"

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.json"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def tokenizer(self) -> Path:
        return self.path / "tokenizer"

    @property
    def logs(self) -> Path:
        """TensorBoard's event files."""
        return self.path / "logs"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def checkpoint(self, name: str) -> Path:
        """``last``, ``best`` or ``avg``: DIR/checkpoints/<name>.pt."""
        return self.checkpoints / f"{name}.pt"

    @property
    def last(self) -> Path:
        return self.checkpoint("last")

    @property
    def best(self) -> Path:
        return self.checkpoint("best")

    @property
    def evaluations(self) -> Path:
        """DIR/eval/, one folder per test set."""
        return self.path / "eval"

    def evaluation(self, testset: str) -> EvalFiles:
        return EvalFiles(self.evaluations / testset)

    @property
    def archived(self) -> list[Path]:
        """The small files a study's archive keeps of a finished run (``eval/`` beside them), its plugin files among them."""
        return [self.config, self.manifest, self.metrics, *sorted(self.plugins.glob("*.py"))]


MIGRATE_COMMAND = "python -m nmt archive migrate"


@dataclass(frozen=True)
class ArchiveDir:
    """The paths of a study's archive (module doc): its run folders and its stored test sets."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def testsets(self) -> Path:
        """ARCHIVE/testsets/: each plain test set once."""
        return self.path / "testsets"

    def stored(self, testset: str, tag: str) -> tuple[Path, Path]:
        """The sources' and references' files of the stored test set ``testset`` tagged ``tag``."""
        return self.testsets / f"{testset}.{tag}.src", self.testsets / f"{testset}.{tag}.ref"

    def tags(self, testset: str) -> list[str]:
        """The tags of every stored copy of ``testset`` (one unless runs were given different texts
        under one name), sorted."""
        found = self.testsets.glob(f"{testset}.*.src") if self.testsets.is_dir() else []
        return sorted(p.name[len(testset) + 1:-len(".src")] for p in found)

    def runs(self) -> list[Path]:
        """The run folders (each holds its resolved config), sorted by name."""
        return sorted(d for d in self.path.iterdir() if RunDir(d).config.is_file()) if self.path.is_dir() else []

    def old_layout(self) -> list[Path]:
        """The evaluation folders that still keep their own copy of a test set (the layout before
        ``testsets/``)."""
        return [folder for run in self.runs() if RunDir(run).evaluations.is_dir()
                for folder in sorted(RunDir(run).evaluations.iterdir()) if EvalFiles(folder).holds_test_set]


def archives_under(root: Path) -> list[Path]:
    """Every archive under ``root`` (a folder holding run folders with evaluations), at any depth, sorted."""
    name = RunDir(Path(".")).config.name
    return sorted({config.parent.parent for config in Path(root).rglob(name)
                   if RunDir(config.parent).evaluations.is_dir()})


def check_archive_layout(archive: Path) -> None:
    """Refuse, in one line naming the command that migrates it, an archive in the old layout."""
    old = ArchiveDir(archive).old_layout()
    if old:
        raise UserError(f"{archive} is an archive in the old layout ({len(old)} evaluations keep their own copy of "
                        f"the test set, e.g. {old[0]}); migrate it once: {MIGRATE_COMMAND} {archive}")


def check_new_run(run_dir: Path, overwrite: bool) -> None:
    """Before any work: an existing non-empty run directory needs ``overwrite`` (or --resume, when
    it holds a checkpoint), and the directory must be creatable. Creates nothing."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} is a file")
    if run_dir.is_dir() and any(run_dir.iterdir()) and not overwrite:
        if RunDir(run_dir).last.is_file():
            raise UserError(f"run directory {run_dir} already exists; use --resume {run_dir} to continue "
                            f"it or --overwrite to start again")
        raise UserError(f"run directory {run_dir} already exists and holds no checkpoint (a run that stopped "
                        f"before its first one?); use --overwrite to start it again")
    existing = next(p for p in (run_dir, *run_dir.absolute().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"cannot write to run directory {run_dir}: {existing} is not a writable folder")


def prepare_new_run(run_dir: Path, overwrite: bool) -> None:
    """Create an empty run directory (``check_new_run`` first); ``overwrite`` empties an existing one.

    Called once the config, data and model have been built, so that a mistake found while
    building them leaves no run directory behind."""
    run_dir = Path(run_dir)
    check_new_run(run_dir, overwrite)
    if run_dir.is_dir() and any(run_dir.iterdir()):
        shutil.rmtree(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise UserError(f"cannot write to run directory {run_dir}: {err.strerror or err}") from None


def read_metrics_log(run_dir: Path) -> list[dict]:
    """The points of DIR/metrics.jsonl, in file order ([] when there is none yet)."""
    path = RunDir(run_dir).metrics
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def remove_temporaries(run_dir: Path) -> list[Path]:
    """Delete the temporary files a killed writer left in the run directory (``utils.io`` writes
    ``.<name>.<random>.tmp`` beside each file, renamed into place when complete). Only while
    holding the run's lock: a live writer's temporary files are not debris."""
    removed = []
    for path in Path(run_dir).rglob(".*.tmp"):
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def save_config(run_dir: Path, cfg: Config) -> None:
    """DIR/config.yaml, and a copy of each plugin file of the config in DIR/plugins/, which the saved config
    names relative to itself: a run (and its archive) reloads with the plugin it trained with, on any machine."""
    tree = own_tree(cfg)
    plugins = cfg.model.positional.plugins
    if not plugins:
        atomic_write_text(RunDir(run_dir).config, dump_config(tree))
        return
    folder = RunDir(run_dir).plugins
    names = [Path(p).name for p in plugins]
    if len(set(names)) < len(names):
        raise UserError(f"model.positional.plugins names two files of one name ({', '.join(plugins)}); a run keeps "
                        "copies of them side by side: rename one")
    folder.mkdir(parents=True, exist_ok=True)
    for path, name in zip(plugins, names, strict=True):
        if Path(path).resolve() != (folder / name).resolve():
            atomic_write_text(folder / name, Path(path).read_text(encoding="utf-8"))
    tree["model"]["positional"]["plugins"] = [f"{folder.name}/{name}" for name in names]
    atomic_write_text(RunDir(run_dir).config, dump_config(tree))


def run_config_tree(run_dir: Path) -> dict:
    """The run's saved ``config.yaml`` as a plain tree, the caller's to change (a study's tables read it
    once a run: ``scoring.loaded``)."""
    path = RunDir(run_dir).config
    if not path.is_file():
        raise UserError(f"{run_dir} is not a run directory (no {path.name})")
    return yaml.load(path.read_text(encoding="utf-8"), Loader=CONFIG_LOADER)


def run_config(run_dir: Path, tree: dict | None = None) -> Config:
    """The run's saved config (or ``tree``, a changed copy of it), checked: plugin files are found beside it."""
    return from_dict(run_config_tree(run_dir) if tree is None else tree, default_source=str(RunDir(run_dir).config))


def load_run_config(run_dir: Path, overrides: list[str] | None = None) -> Config:
    """The resolved config a run saved, with optional overrides."""
    path = RunDir(run_dir).config
    if not path.is_file():
        raise UserError(f"{run_dir} is not a run directory (no {path.name})")
    return load_config(path, overrides)


