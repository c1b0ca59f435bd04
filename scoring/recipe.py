"""Which runs may share a table: one training recipe (configs equal but for scheme and seed), one
arithmetic (fp32, bf16, fp16) and one decoding rule per test set. Each check refuses in one line
naming two runs that differ."""
from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path

from experiment.config import recipe_hash
from experiment.manifest import Manifest
from experiment.run_dir import run_config
from scoring.evaluated import EvaluatedRun
from scoring.loaded import LoadedRun, as_loaded
from utils.errors import UserError


def training_precision(manifest: Manifest, amp: str) -> str:
    """The arithmetic a run trained in: its manifest's ``precision`` (fp32, bf16, fp16), or for a
    run archived before manifests recorded it, what ``train.amp`` (``amp``) gave on the device its
    manifest names — fp32 on a CPU; on a GPU, ``auto`` meant bf16 on every GPU runs were archived on."""
    if manifest.precision is not None:
        return manifest.precision
    if manifest.on_cpu or amp == "none":
        return "fp32"
    return "fp16" if amp == "fp16" else "bf16"


def check_same_recipe(runs: Sequence[LoadedRun | Path], varying: set[str] | frozenset[str] = frozenset()) -> None:
    """Refuse runs whose configs differ in anything but the positional scheme, the seed and the
    dotted keys of ``varying`` (the keys a study's declared rows set apart, e.g. ``train.max_steps``),
    or that trained in different arithmetic (``train.amp: auto`` is fp32 on a CPU, bf16 on a GPU): a
    table must never mix training recipes by accident. One line naming two runs that differ. A
    `transformers` Marian folder (a study's ``pretrained`` row) was trained by no recipe of the suite's:
    it is an anchor beside the table's runs, named as such (``marian_row``), and not checked."""
    recipes: dict[str, Path] = {}
    precisions: dict[str, Path] = {}
    for run in (run for run in as_loaded(runs) if not run.marian):
        tree = copy.deepcopy(run.tree)
        for key in varying:
            *sections, last = key.split(".")
            node = tree
            for section in sections:
                node = node.get(section) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(last, None)  # the schema's default stands in, the same for every run
        cfg = run_config(run.folder, tree)
        precisions.setdefault(training_precision(run.manifest, cfg.train.amp), run.folder)
        # the scheme and where it came from (a plugin's file) are the row, not the recipe
        cfg.seed, cfg.model.positional.name, cfg.model.positional.plugins = 0, "", []
        recipes.setdefault(recipe_hash(cfg), run.folder)
    if len(recipes) > 1:
        first, other = list(recipes.values())[:2]
        raise UserError(f"the runs were trained with different recipes ({first} and {other} differ in more than "
                        f"scheme and seed); a table must not mix them: move the runs of the old recipe aside")
    if len(precisions) > 1:
        (p1, first), (p2, other) = list(precisions.items())[:2]
        raise UserError(f"the runs were trained in different precisions ({first}: {p1}, {other}: {p2}; "
                        f"train.amp: auto is fp32 on a CPU and bf16 on a GPU); a table must not mix them")


def check_same_decoding(runs: list[EvaluatedRun], testset: str) -> None:
    """Refuse runs decoded with different rules on ``testset`` (one line naming two of them). The
    decodes of a study's evaluation variant (``record.variant``) differ from the plain ones as the
    variant declares; they must agree among themselves."""
    by_variant: dict[str | None, dict[str, EvaluatedRun]] = {}
    for r in runs:
        by_variant.setdefault(r.variant, {}).setdefault(json.dumps(r.record.decode.rule(), sort_keys=True), r)
    rules = next((found for found in by_variant.values() if len(found) > 1), {})
    if len(rules) > 1:
        (first_rule, first), (other_rule, other) = list(rules.items())[:2]
        raise UserError(f"{first.run_dir} and {other.run_dir} were decoded differently on '{testset}' "
                        f"({first_rule} vs {other_rule}); a table must not mix them: evaluate both with the "
                        f"same settings (test.py --run DIR)")
