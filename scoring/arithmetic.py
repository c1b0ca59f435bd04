"""One arithmetic per table: the machine-dependent facts that move a run's floats, read from its
manifest, and the check that a table's runs share them.

The same recipe trained on another CPU (another kernel set, another thread count), another GPU
model, another torch version or in another precision is not the same experiment: BLEU moves with
the rounding (report/demo-kernels measures it). A CPU run's arithmetic is its CPU model, PyTorch's
CPU kernel set and its intra-op threads; a GPU run's is the GPU model (the host CPU does no
arithmetic of the model); both add the torch version and the precision. A pinned CPU run (its kernel
set, MKL's and oneDNN's code paths fixed by environment variables, one thread: ``Arithmetic.pinned``)
computes the same floats on any CPU model with those instructions, so there the pins replace the model. A field the manifest does
not record counts as different from every value, another unrecorded one included: nothing shows
two such runs computed alike. The precision is the one field derived where unrecorded: it follows
from ``train.amp`` and the device (``scoring.recipe.training_precision``).

A table refuses a mix in one line naming two runs and the field, unless the caller allows it
(a study's ``mixed_arithmetic: true``, ``nmt test --compare --allow-mixed-arithmetic``); either
way ``arithmetic_note`` says in the caption what the table's runs ran on.

The code is part of the experiment too: each run's manifest records the commit it was trained at,
and a table whose runs came from different commits refuses them the same way unless its study
declares ``mixed_code: true`` (the caption then lists the commits); runs that recorded none (made by
hand, or by tests) are not counted. So is a plugin scheme's code (``models.positional.plugins``): the
manifests record its file's SHA-256 or its package's version, a table refuses two versions of one
plugin scheme unless its study declares ``mixed_plugins: true``, and the caption names the versions.
"""
from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiment.manifest import Manifest, read_manifest
from experiment.run_dir import RunDir, run_config_tree
from scoring.loaded import LoadedRun, as_loaded
from scoring.recipe import training_precision
from utils.device import MATH_PIN_VARIABLES
from utils.errors import UserError

UNRECORDED = "not recorded"
MIX_FLAG = "mixed_arithmetic: true in the study file, --allow-mixed-arithmetic for nmt test --compare"
CODE_FLAG = "mixed_code: true in the study file, --allow-mixed-arithmetic for nmt test --compare"
PLUGIN_FLAG = "mixed_plugins: true in the study file, --allow-mixed-arithmetic for nmt test --compare"
# What a table may mix: True allows everything (a command's --allow-mixed-arithmetic), a set names it: "arithmetic",
# "code", "plugins" (a study's mixed_arithmetic, mixed_code and mixed_plugins).
Allowance = bool | frozenset[str]


def allows(allowance: Allowance, what: str) -> bool:
    """Whether ``allowance`` lets a table mix ``what`` ("arithmetic", "code" or "plugins")."""
    return allowance if isinstance(allowance, bool) else what in allowance


@dataclass(frozen=True)
class Arithmetic:
    """What a run computed on (module doc); ``None``: the manifest does not say."""

    device: str  # "cpu" or the GPU's model name
    cpu: str | None  # CPU runs: the CPU model
    kernels: str | None  # CPU runs: PyTorch's CPU kernel set
    threads: int | None  # CPU runs: intra-op threads
    torch: str | None
    precision: str
    commit: str = ""  # the code's commit, 7 hex digits ("" unrecorded); checked apart (``code_note``)
    pins: str | None = None  # CPU runs: the libraries' pinned code paths ("MKL_CBWR=AVX2, ..."), None: unpinned
    threads_changed: bool = False  # CPU runs: --threads auto re-divided the cores during training (threads: None)

    @property
    def pinned(self) -> bool:
        """A CPU run whose every source of CPU-dependent rounding was fixed: PyTorch's kernel set (always
        recorded), MKL's and oneDNN's code paths, and one thread — the same floats on any CPU model
        that has the pinned instructions (``bench.arithmetic_pins`` checks it), so the model is no field."""
        return (self.device == "cpu" and self.threads == 1 and self.kernels is not None
                and all(f"{name}=" in (self.pins or "") for name in MATH_PIN_VARIABLES))

    @property
    def fields(self) -> dict[str, object]:
        """The fields that must agree, by name (a GPU run's host CPU is not among them; a pinned run's
        CPU model neither, its pins instead)."""
        if self.device != "cpu":
            own = {}
        elif self.pinned:
            own = {"pins": self.pins, "kernels": self.kernels, "threads": self.threads}
        else:
            own = {"cpu": self.cpu, "kernels": self.kernels, "threads": self.threads}
        return {"device": self.device, **own, "torch": self.torch, "precision": self.precision}

    def differs_from(self, other: Arithmetic) -> str | None:
        """The first field in which the two differ (an unrecorded field differs from everything), or None."""
        mine, theirs = self.fields, other.fields
        for name in mine:
            if name not in theirs or mine[name] is None or theirs[name] is None or mine[name] != theirs[name]:
                return name
        return None

    def describe(self) -> str:
        """e.g. ``CPU AMD EPYC, AVX512 kernels, 1 thread, torch 2.13.0+cpu, fp32``."""
        def shown(value: object) -> str:
            return UNRECORDED if value is None else str(value)
        torch = f"torch {shown(self.torch)}"
        if self.device != "cpu":
            return f"{self.device}, {torch}, {self.precision}"
        threads = ("threads changed during training" if self.threads_changed
                   else "threads not recorded" if self.threads is None
                   else f"{self.threads} thread{'s' if self.threads != 1 else ''}")
        if self.pinned:
            return f"CPU arithmetic pinned (kernels {self.kernels}, {self.pins}), {threads}, {torch}, {self.precision}"
        return f"CPU {shown(self.cpu)}, kernels {shown(self.kernels)}, {threads}, {torch}, {self.precision}"


def arithmetic_of(run: LoadedRun | Path) -> Arithmetic:
    """The arithmetic of a run (loaded, or its folder) from its manifest (and config, for the precision)."""
    if isinstance(run, LoadedRun):
        manifest, tree = run.manifest, run.tree
    else:  # a folder: its manifest alone where it keeps no config
        manifest, tree = read_manifest(run), run_config_tree(run) if RunDir(run).config.is_file() else {}
    amp = ((tree or {}).get("train") or {}).get("amp", "auto")
    precision = training_precision(manifest, amp)
    torch, commit = manifest.packages.get("torch"), (manifest.git_commit or "")[:7]
    if manifest.on_cpu:
        pins = ", ".join(f"{k}={v}" for k, v in sorted((manifest.math_pins or {}).items())) or None
        # a run whose threads --threads auto changed mid-training is of no one thread count: unrecorded, it
        # differs from every other run's arithmetic
        changed = bool(manifest.thread_changes)
        return Arithmetic("cpu", manifest.cpu, manifest.cpu_kernels, None if changed else manifest.threads, torch,
                          precision, commit, pins, changed)
    return Arithmetic(str(manifest.device), None, None, None, torch, precision, commit)


def arithmetic_note(rows: dict[str, Sequence[LoadedRun | Path]], allow_mixed: Allowance = False) -> str:
    """The caption's sentences on the arithmetic and the code of a table's runs (``rows``: row label ->
    its runs, loaded or their folders). Refuses a mix in one line naming two runs and the field unless ``allow_mixed``
    allows it; an allowed mix is listed (runs per arithmetic, and the rows whose seeds span several).
    A `transformers` Marian folder trained outside the suite: named as an anchor, its training unchecked."""
    rows = {label: as_loaded(runs) for label, runs in rows.items()}
    anchors = [label for label, runs in rows.items() if runs and all(run.marian for run in runs)]
    rows = {label: runs for label, runs in rows.items() if label not in anchors}
    found = {run.folder: arithmetic_of(run) for runs in rows.values() for run in runs}
    manifests = {run.folder: run.manifest for runs in rows.values() for run in runs}
    anchored = (f"Trained outside the suite (transformers Marian models) and decoded here: {', '.join(anchors)}."
                if anchors else "")
    if not found:
        return anchored
    return " ".join(note for note in (_arithmetic_sentence(rows, found, allows(allow_mixed, "arithmetic")),
                                      code_note(found, allows(allow_mixed, "code")),
                                      plugin_note(manifests, allows(allow_mixed, "plugins")), anchored) if note)


def _plugin_version(record: dict) -> str:
    """A manifest's plugin record as the caption names its version."""
    if record.get("sha256"):
        return f"{record.get('file', 'file')} sha256 {record['sha256'][:12]}"
    return f"{record.get('package', 'package')} {record.get('version', UNRECORDED)}"


def plugin_note(manifests: dict[Path, Manifest], allow_mixed: bool = False) -> str:
    """The caption's sentence on the plugin schemes the runs (folder -> manifest) used and their versions
    ("" for none); two versions of one plugin scheme are a one-line error naming two runs unless ``allow_mixed``."""
    versions: dict[str, dict[str, Path]] = {}  # scheme -> version -> its first run
    for run, manifest in manifests.items():
        for name, record in (manifest.plugins or {}).items():
            versions.setdefault(name, {}).setdefault(_plugin_version(record), run)
    if not versions:
        return ""
    mixed = {name: found for name, found in versions.items() if len(found) > 1}
    if mixed and not allow_mixed:
        name, found = next(iter(mixed.items()))
        (first, first_run), (other, other_run) = list(found.items())[:2]
        raise UserError(f"{first_run} and {other_run} were trained with two versions of the plugin scheme '{name}' "
                        f"({first} vs {other}); a table must not mix them unless declared ({PLUGIN_FLAG})")
    listed = "; ".join(f"{name}: {', '.join(sorted(found))}" for name, found in sorted(versions.items()))
    return f"Plugin schemes{', versions mixed as declared' if mixed else ''}: {listed}."


def code_note(found: dict[Path, Arithmetic], allow_mixed: bool = False) -> str:
    """The caption's sentence on the commits the runs (run folder -> its ``Arithmetic``) were trained at
    ("" when none recorded one); runs of different commits are a one-line error unless ``allow_mixed``."""
    commits = {run: a.commit for run, a in found.items()}
    counts = collections.Counter(c for c in commits.values() if c)
    if not counts:
        return ""
    if len(counts) == 1:
        return f"Code: every run at commit {next(iter(counts))}."
    if not allow_mixed:
        first, other = list(counts)[:2]
        runs_of = {c: next(run for run, made in commits.items() if made == c) for c in (first, other)}
        raise UserError(f"{runs_of[first]} and {runs_of[other]} were trained at different commits ({first} vs {other}); "
                        f"a table must not mix them unless declared ({CODE_FLAG})")
    listed = ", ".join(f"{n} run{'s' if n != 1 else ''} at {c}" for c, n in counts.most_common())
    return f"Code mixed, declared for this table: {listed}."


def _arithmetic_sentence(rows: dict[str, list[LoadedRun]], found: dict[Path, Arithmetic], allow_mixed: bool) -> str:
    """``arithmetic_note``'s sentence on the arithmetic (its refusal of a mix unless ``allow_mixed``)."""
    first_run, first = next(iter(found.items()))
    differences = ((run, first.differs_from(a) or a.differs_from(first)) for run, a in found.items() if run != first_run)
    odd = next(((run, name) for run, name in differences if name), None)
    if odd is None:
        if not first.pinned:
            return f"Arithmetic: every run {first.describe()}."
        cpus = collections.Counter(UNRECORDED if a.cpu is None else a.cpu for a in found.values())
        ran = ", ".join(f"{cpu} ({n} run{'s' if n != 1 else ''})" for cpu, n in sorted(cpus.items()))
        return f"Arithmetic: every run {first.describe()}; CPUs: {ran}."
    run, name = odd
    if not allow_mixed:
        mine, theirs = first.fields.get(name), found[run].fields.get(name)
        how = (f"{name}: recorded by neither manifest, and an unrecorded field counts as different"
               if mine is None and theirs is None else
               f"{name}: {UNRECORDED if mine is None else mine} vs {UNRECORDED if theirs is None else theirs}")
        raise UserError(f"{first_run} and {run} ran in different arithmetic ({how}); a "
                        f"table must not mix them unless allowed ({MIX_FLAG})")
    counts = collections.Counter(a.describe() for a in found.values())
    kinds = "; ".join(f"{n} run{'s' if n != 1 else ''} {what}" for what, n in counts.most_common())
    spanning = [label for label, runs in rows.items() if len({found[r.folder].describe() for r in runs}) > 1]
    unrecorded = [label for label, runs in rows.items() if label not in spanning
                  and any(UNRECORDED in found[r.folder].describe() for r in runs) and len(runs) > 1]
    return (f"Arithmetic mixed, allowed for this table (a run's unrecorded field counts as different): {kinds}. "
            f"Rows whose seeds ran in different arithmetic: {', '.join(spanning) or 'none'}"
            + (f"; rows whose seeds left a field unrecorded: {', '.join(unrecorded)}" if unrecorded else "") + ".")
