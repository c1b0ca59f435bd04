"""Evaluated runs as the tables read them (``DIR/config.yaml``, ``manifest.json``, ``metrics.jsonl``,
``eval/<test set>/``, or an archive's layout: ``scoring.texts``; no model needed), and the labels of their groups: runs that differ only in
seed form one group, one row of a table."""
from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiment.config import recipe_hash, to_dict
from experiment.marian import marian_row
from models.positional.registry import scheme_parts
from scoring.loaded import Evaluation, LoadedRun, load_run
from scoring.metrics import Scored
from scoring.record import EvalRecord
from utils.config import flatten
from utils.errors import UserError


@dataclass
class EvaluatedRun:
    """A loaded run (``scoring.loaded``) on one test set, as a table's row reads it."""

    run: LoadedRun
    scheme: str
    group: str  # hash of the config without its seed (+ the variant): runs that differ only in seed share it
    seed: int
    parameters: int | None
    valid_loss: float | None
    record: EvalRecord
    hyps: list[str]
    refs: list[str]
    scores: Scored | Evaluation | None = None  # where the sentence scores come from (None: ``hyps`` on ``refs``)

    @property
    def scored(self) -> Scored:
        """The hypotheses scored sentence by sentence, on first use (a table that reads BLEU alone scores nothing)."""
        if isinstance(self.scores, Evaluation):
            return self.scores.scored
        if self.scores is None:
            self.scores = Scored.of(self.hyps, self.refs)
        return self.scores

    @property
    def run_dir(self) -> Path:
        return self.run.folder

    @property
    def variant(self) -> str | None:
        """The study's evaluation variant that decoded the run again (None: as trained)."""
        return self.record.variant

    @property
    def row_scheme(self) -> str:
        """The scheme, with ``+<variant>`` for a variant's decode: what names its row."""
        return self.scheme + (f"+{self.variant}" if self.variant else "")


def load_evaluated(run: LoadedRun | Path, testset: str) -> EvaluatedRun:
    """The run (loaded, or its folder, loaded here) on ``testset``."""
    run = run if isinstance(run, LoadedRun) else load_run(Path(run))
    evaluation = run.evaluation(testset)
    cfg = copy.copy(run.config)
    cfg.seed = 0  # the recipe without its seed
    record = evaluation.record
    group = recipe_hash(cfg) + (f"+{record.variant}" if record.variant else "")  # a variant's decode: its own row
    scheme = marian_row(run.folder) if run.marian else run.config.model.positional.name
    return EvaluatedRun(run, scheme, group, run.config.seed, run.manifest.parameters, run.best_valid_loss, record,
                        evaluation.hypotheses, evaluation.references, evaluation)


def evaluated_rows(runs: Sequence[LoadedRun], testset: str) -> list[EvaluatedRun]:
    """Each of ``runs`` on ``testset``."""
    return [load_evaluated(run, testset) for run in runs]


def group_labels(groups: dict[str, tuple[str, LoadedRun]], named: dict[Path, str] | None = None) -> dict[str, str]:
    """Row labels for groups of runs (key -> (scheme, one of its runs)): the scheme, and where two
    groups share it, the config settings (seed and decoding aside) in which each differs from
    the others of its scheme, e.g. ``shape (model.positional.shape.max_shift=20)``, else what tells their
    folders apart. ``named`` (run folder -> label, e.g. a study's row labels ``shape-k20``) names each
    group by its run's label instead."""
    if named is not None:
        return _unique({key: named[run.folder] for key, (_, run) in groups.items()}, groups)
    def settings(run: LoadedRun) -> dict[str, object]:
        tree = to_dict(run.config)  # defaults filled: keys newer than a run are not settings
        tree.pop("seed", None)
        tree.pop("decode", None)
        tree["model"]["positional"].pop("plugins", None)  # where each run's copy lies; its version is in the recipe
        return flatten(tree)

    schemes = [scheme for scheme, _ in groups.values()]
    shared = {key: settings(d) for key, (scheme, d) in groups.items() if schemes.count(scheme) > 1}
    labels = {}
    for key, (scheme, run) in groups.items():
        if key not in shared:
            labels[key] = scheme
            continue
        mine = shared[key]
        others = [shared[k] for k, (other, _) in groups.items() if other == scheme and k != key]
        differing = [k for k in sorted(set(mine).union(*others)) if any(o.get(k) != mine.get(k) for o in others)]
        # options of other schemes (model.positional.<other>.*) say nothing about this one's runs; the scheme's own
        # are those of each of its parts (``learnable+t5``; an evaluation variant's ``rope+oracle`` is rope's)
        parts = scheme_parts(scheme)
        own = [k for k in differing if not (k.startswith("model.positional.") and k.count(".") >= 3
                                            and k.split(".")[2] not in parts)]
        folders = [d.folder for k, (other, d) in groups.items() if other == scheme and k != key]
        labels[key] = f"{scheme} ({', '.join(f'{k}={mine.get(k)}' for k in own or differing) or _folder_label(run.folder, folders)})"
    return _unique(labels, groups)


def _unique(labels: dict[str, str], groups: dict[str, tuple[str, LoadedRun]]) -> dict[str, str]:
    """``labels`` (group key -> label), once no label names two groups."""
    twice = next((label for label in labels.values() if list(labels.values()).count(label) > 1), None)
    if twice is not None:  # two rows under one label would fold one into the other in every table
        folders = [str(d.folder) for key, (_, d) in groups.items() if labels[key] == twice]
        raise UserError(f"two rows would share the label '{twice}' ({' and '.join(folders)}): their configs differ "
                        f"only in settings a label leaves out, or their runs are replicates of one row")
    return labels


def _folder_label(run_dir: Path, others: list[Path]) -> str:
    """What tells ``run_dir`` from ``others`` (rows of one scheme and one recipe): its name, else its
    parent folder (a re-run beside an archived run: ``runs/multi30k`` and ``report/multi30k``), else its path."""
    for shown in (lambda d: d.name, lambda d: str(d.parent)):
        if all(shown(Path(run_dir)) != shown(Path(other)) for other in others):
            return shown(Path(run_dir))
    return str(run_dir)


def row_keys(runs: Sequence[tuple[str, int, Path]], named: dict[Path, str] | None = None) -> list[str]:
    """The row each run joins, from its (recipe, seed, folder): runs of one recipe that differ only in
    seed fold into one row, keyed by the recipe. Two runs of one recipe *and* seed are replicates, not
    seeds (a re-run beside the archived run, say): folded, they would pass for a seed spread. That
    recipe's runs then form a row per parent folder, or a row per folder where one parent holds both.
    With ``named`` (run folder -> label: a study's rows), the runs of one label are a row, keyed by it;
    two of one label and seed are a one-line error. A folder named twice is a one-line error: its
    second copy would pass for another seed."""
    resolved = [Path(folder).resolve() for _, _, folder in runs]
    twice = next((folder for i, (_, _, folder) in enumerate(runs) if resolved[i] in resolved[:i]), None)
    if twice is not None:
        raise UserError(f"{twice} is named twice: name each run once (a copy would count as another seed of its row)")
    if named is not None:
        keys = [named[Path(folder)] for _, _, folder in runs]
        seen: dict[tuple[str, int], Path] = {}
        for key, (_, seed, folder) in zip(keys, runs):
            if seen.setdefault((key, seed), Path(folder)) != Path(folder):
                raise UserError(f"{seen[key, seed]} and {folder} are both seed {seed} of row '{key}': one would pass "
                                f"for another seed")
        return keys
    by_recipe: dict[str, list[tuple[int, Path]]] = {}
    for recipe, seed, folder in runs:
        by_recipe.setdefault(recipe, []).append((seed, Path(folder)))

    def distinct(pairs: list[tuple[int, Path]], where) -> bool:
        seen = {}
        return all(seen.setdefault((where(folder), seed), folder) == folder for seed, folder in pairs)
    split = {recipe: None if distinct(pairs, lambda _: "") else "parent" if distinct(pairs, lambda f: f.parent)
             else "folder" for recipe, pairs in by_recipe.items()}
    return [recipe if split[recipe] is None
            else f"{recipe}@{Path(folder).parent if split[recipe] == 'parent' else Path(folder)}"
            for recipe, _, folder in runs]


REPLICATES_NOTE = ("Runs of one recipe and one seed (replicates, e.g. a re-run beside an archived run) are not "
                   "folded: each is a row of its own, named by its folder.")


def replicates_note(row_recipes: Iterable[str]) -> str:
    """``REPLICATES_NOTE`` with a leading space for a caption whose rows (given by their recipes, one
    per row) split some recipe's runs (``row_keys``); "" when every recipe is one row."""
    recipes = list(row_recipes)
    return " " + REPLICATES_NOTE if len(recipes) > len(set(recipes)) else ""
