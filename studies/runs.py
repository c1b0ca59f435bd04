"""One run of a study: its folder, whether it is finished and tested, training and testing it
(``train_and_test``, the same call whatever executor runs it), archiving its small files, and the
order a study's runs train in.

A run is a row (its label: a scheme's name, or a row of ``rows:``) and a seed: ``<out>/<label>``
for seed 1, ``<out>/<label>-seed<N>`` otherwise. A study's evaluation variant decodes a trained run
again into ``<run folder>+<variant>`` (``variant_dir``): the run's manifest and metrics log, its
config with the variant's overrides, an ``eval/`` of its own; tables show it as row ``<label>+<variant>``.
A row of a ``pretrained`` Marian folder is never trained: its folder's files are linked into the run
folder (``link_pretrained``), which the study's decoding and test sets then score as a trained run's.
"""
from __future__ import annotations

import os
import re
import shutil
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from data.pipeline import prepare_data
from experiment.config import Config, recipe_hash
from experiment.decode_config import DecodeConfig, DecodeRecord, resolve_settings
from experiment.manifest import read_manifest
from experiment.marian import is_marian_folder, load_marian, marian_config, marian_weights
from experiment.run_dir import RunDir, load_run_config, save_config
from experiment.trained import TrainedRun, load_run, with_training_lengths
from models.positional import SCHEMES, where_it_acts
from scoring.record import read_record
from search.evaluate import evaluate_splits
from studies.archive import archive_run
from studies.catalog import Study
from studies.workers import output_to
from training.loop import train
from utils.errors import UserError


def run_dir_of(study: Study, label: str, seed: int) -> Path:
    """``<out>/<label>`` for seed 1 (every study's default), ``<out>/<label>-seed<N>`` otherwise.

    The name depends on the seed alone, not on how many seeds are asked for, so adding seeds to a
    finished study keeps (and archives beside) the runs it already has.
    """
    return study.out / (label if seed == 1 else f"{label}-seed{seed}")


def variant_dir(run_dir: Path, variant: str) -> Path:
    """Where ``run_dir`` decoded again under the evaluation variant ``variant`` lives: ``<run folder>+<variant>``."""
    return Path(run_dir).with_name(f"{Path(run_dir).name}+{variant}")


def variant_of(run_dir: Path) -> str | None:
    """The evaluation variant a folder named by ``variant_dir`` holds (None: a trained run's own folder)."""
    match = re.fullmatch(r".+\+([a-z0-9_]+)", Path(run_dir).name)
    return match.group(1) if match else None


def label_of(run_dir: Path) -> str:
    """The row label of a run folder named by ``run_dir_of`` (``+<variant>`` kept: ``rope-seed2+oracle``
    is row ``rope+oracle``)."""
    match = re.fullmatch(r"(.+?)(?:-seed\d+)?(\+[a-z0-9_]+)?", Path(run_dir).name)
    return match.group(1) + (match.group(2) or "")


def finished(run_dir: Path) -> bool:
    """The run's training ended at its budget (or early stopping), not stopped by a signal (a pretrained
    row's folder: once its model is linked in)."""
    return is_marian_folder(run_dir) or read_manifest(run_dir).finished


def weights_of(run_dir: Path) -> Path:
    """The weights a run's evaluations decode: its best checkpoint, or a pretrained row's model file."""
    return marian_weights(Path(run_dir)) if is_marian_folder(run_dir) else RunDir(run_dir).best


def link_pretrained(source: Path, run_dir: Path) -> None:
    """The files of the Marian folder ``source`` in ``run_dir`` (hard links where the file system allows,
    else copies); a missing folder is one line."""
    if not is_marian_folder(source):
        raise UserError(f"{source}: not a transformers Marian folder (config.json of model_type marian; "
                        "download one with huggingface-cli download Helsinki-NLP/opus-mt-fr-en --local-dir DIR)")
    run_dir.mkdir(parents=True, exist_ok=True)
    for path in sorted(p for p in source.iterdir() if p.is_file()):
        target = run_dir / path.name
        if target.is_file() and target.stat().st_size == path.stat().st_size:
            continue
        target.unlink(missing_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)


def load_row_run(study: Study, label: str, seed: int, run_dir: Path, device: str = "cpu",
                 overrides: tuple[str, ...] | list[str] = ()) -> TrainedRun:
    """The run of ``label`` in ``run_dir`` at its best checkpoint, ``overrides`` on its config (a pretrained
    row: its Marian model in the study's config for that row)."""
    if study.row(label).pretrained is not None:
        return load_marian(run_dir, device, list(overrides), base=study.config(label, seed))
    return load_run(run_dir, "best", device, overrides=with_training_lengths(run_dir, list(overrides)))


def evaluated(run_dir: Path, settings: DecodeConfig, testsets: list[str] | None = None,
              trained: Path | None = None) -> bool:
    """Every test set (default: the configured test splits) has results newer than the best
    checkpoint (of ``trained``, default ``run_dir``: a variant's folder has none of its own), decoded
    as ``settings`` say (changed decoding settings re-evaluate a run; they never retrain it)."""
    best = weights_of(trained or run_dir)
    wanted = DecodeRecord.of(settings, 0).rule()
    for testset in testsets if testsets is not None else load_run_config(run_dir).data.test_splits:
        path = RunDir(run_dir).evaluation(testset).record
        if not (best.is_file() and path.is_file() and path.stat().st_mtime >= best.stat().st_mtime):
            return False
        if read_record(path).decode.rule() != wanted:
            return False
    return True


def done(study: Study, label: str, seed: int) -> bool:
    """The run is finished and tested with the study's decoding, and under each of its evaluation
    variants: nothing left to do for it."""
    run_dir = run_dir_of(study, label, seed)
    cfg = study.config(label, seed)
    return finished(run_dir) and evaluated(run_dir, resolve_settings(cfg.decode), study.test_sets(cfg.data.test_splits)) \
        and all(variant_evaluated(study, label, seed, variant) for variant in study.variants_of(label))


def variant_evaluated(study: Study, label: str, seed: int, variant: str) -> bool:
    """The run was decoded under ``variant`` on every test set since its best checkpoint."""
    run_dir = run_dir_of(study, label, seed)
    cfg = study.variant_config(label, seed, variant)
    target = variant_dir(run_dir, variant)
    return RunDir(target).config.is_file() and evaluated(
        target, resolve_settings(cfg.decode), study.test_sets(cfg.data.test_splits), trained=run_dir)


def with_variants(study: Study, run_dirs: list[Path]) -> list[Path]:
    """``run_dirs`` and, after each, its decodes under the study's evaluation variants that exist: the
    rows of the study's tables."""
    return [folder for run_dir in run_dirs
            for folder in [run_dir, *(variant_dir(run_dir, v) for v in study.variants_of(label_of(run_dir)))]
            if RunDir(folder).config.is_file()]


def decode_variant(study: Study, label: str, seed: int, variant: str, device: str = "cpu") -> Path:
    """The trained run decoded again under ``variant`` (its overrides on the run's config: decoding or
    test-time model settings; the weights are the run's best) into ``variant_dir``; returns it."""
    run_dir = run_dir_of(study, label, seed)
    target = variant_dir(run_dir, variant)
    if variant_evaluated(study, label, seed, variant):
        return target
    run = load_row_run(study, label, seed, run_dir, device, study.variants[variant].overrides)
    target.mkdir(parents=True, exist_ok=True)
    save_config(target, run.cfg)
    for path in [*RunDir(run_dir).archived, *marian_config(run_dir)]:  # where they come from: manifest, metrics log
        if path.parent == Path(run_dir) and path != RunDir(run_dir).config and path.is_file():
            shutil.copy2(path, target / path.name)
    for result in evaluate_splits(replace(run, run_dir=target), None, resolve_settings(run.cfg.decode), device,
                                  concat=study.concat, variant=variant):
        print(f"[{variant}] {result.summary()}", flush=True)
    return target


def check_same_config(run_dir: Path, cfg: Config) -> None:
    """Refuse to keep or resume a run started from a different config than the study's now.

    Otherwise an edited config (or a run left by an older version of the study) would silently
    be continued with its old settings and end up in the comparison beside the new ones.
    """
    if not RunDir(run_dir).config.is_file():
        return
    wanted, found = recipe_hash(cfg), recipe_hash(load_run_config(run_dir))
    if wanted != found:
        raise UserError(f"{run_dir} was trained with another config than the study's now "
                        f"(config hash {found}, expected {wanted}); move or delete {run_dir} to train it again")


class RunInterrupted(UserError):
    """A run whose training a signal stopped (``signal``: its name), its ``last.pt`` saved."""

    def __init__(self, signal_name: str, message: str):
        super().__init__(message)
        self.signal = signal_name

    def __reduce__(self):  # a worker process hands it back pickled: both arguments, not args alone
        return type(self), (self.signal, str(self))


@dataclass(frozen=True)
class RunOutcome:
    """One run of a study: its folder, and whether this start trained it (False: it had finished
    earlier and was kept)."""

    run_dir: Path
    trained: bool


def train_and_test(study: Study, label: str, seed: int, device: str = "cpu") -> RunOutcome:
    """Train one run of the study (or keep/resume it) and test it; archive it if the study does."""
    run_dir = run_dir_of(study, label, seed)
    cfg = study.config(label, seed)
    pretrained = study.row(label).pretrained
    if pretrained is not None:
        link_pretrained(pretrained, run_dir)
    else:
        check_same_config(run_dir, cfg)
    kept = finished(run_dir)
    if pretrained is not None:
        print(f"[{study.name}] {run_dir}: the pretrained model of {pretrained}, not trained", flush=True)
    elif kept:
        print(f"[{study.name}] {run_dir}: finished earlier, kept", flush=True)
    else:
        t0 = time.perf_counter()
        resume = RunDir(run_dir).last.is_file()
        result = train(cfg, run_dir, resume=resume, overwrite=not resume and run_dir.exists())
        if result.interrupted:  # neither tested nor archived: the next start resumes it
            raise RunInterrupted(result.interrupted,
                                 f"{run_dir}: training stopped by {result.interrupted} at update {result.steps}; "
                                 f"start the study again to resume it")
        print(f"[{study.name}] {run_dir}: trained in {time.perf_counter() - t0:.0f} s", flush=True)
    settings = resolve_settings(cfg.decode)  # the study's decoding, whatever the run was trained with
    if not evaluated(run_dir, settings, study.test_sets(cfg.data.test_splits)):
        run = load_row_run(study, label, seed, run_dir, device)
        if pretrained is not None:
            save_config(run_dir, run.cfg)  # what the tables read of a run, beside its scores
        for result in evaluate_splits(run, None, settings, device, concat=study.concat):
            print(result.summary(), flush=True)
    decoded = [decode_variant(study, label, seed, variant, device) for variant in study.variants_of(label)]
    if study.archive is not None:
        for folder in [run_dir, *decoded]:
            archive_run(folder, study.archive / folder.name)
    return RunOutcome(run_dir, trained=not kept and pretrained is None)


def fill_data_caches(study: Study, runs: list[tuple[str, int]]) -> None:
    """Each seed's data prepared once (corpus, tokenizer, token cache) before the runs start, so that
    parallel runs or jobs read the caches instead of racing to write them."""
    for seed in dict.fromkeys(seed for _, seed in runs):
        cfg = study.config(runs[0][0], seed)
        prepare_data(cfg.data, cfg.tokenizer, cfg.seed)


def run_log(study: Study, label: str, seed: int) -> Path:
    return study.out / "logs" / f"{run_dir_of(study, label, seed).name}.log"


def train_and_test_logged(study: Study, label: str, seed: int, device: str) -> RunOutcome:
    """``train_and_test`` in a worker process, its output in ``<out>/logs/<run>.log``."""
    from utils.cli import setup_logging

    with output_to(run_log(study, label, seed)):
        setup_logging()
        try:
            return train_and_test(study, label, seed, device)
        except BaseException:
            traceback.print_exc()  # into the run's log; the study names the run and the log
            raise


def _study_seeds(study: Study) -> list[int]:
    """Every seed of any row, in first-declared order."""
    return list(dict.fromkeys(seed for label in study.schemes for seed in [*study.seeds, *study.seeds_of(label)]))


def queue(study: Study) -> list[tuple[str, int]]:
    """The (label, seed) runs in training order: every row's first seed, then every row's
    second, ..., so that a study stopped between runs leaves a table with all its rows. Within a
    round, rows that act inside attention (slower to train) go first and the ones that only add
    to the embeddings last, so that parallel workers finish their last runs close together."""
    def embeddings_only(label: str) -> bool:
        scheme = study.row(label).scheme
        return where_it_acts(SCHEMES[scheme]) in ("embeddings", "—") if scheme in SCHEMES else False

    return [(label, seed) for seed in _study_seeds(study)
            for label in sorted(study.schemes, key=embeddings_only)  # stable: declared order otherwise
            if seed in study.seeds_of(label)]


def declared_order(study: Study, run_dirs: list[Path]) -> list[Path]:
    """``run_dirs`` in the study's declared order (rows within seeds), whatever order they trained in."""
    rank = {run_dir_of(study, label, seed): i for i, (seed, label) in
            enumerate((seed, label) for seed in _study_seeds(study) for label in study.schemes)}
    return sorted(run_dirs, key=lambda d: rank.get(d, len(rank)))


def tally(study: Study, total: int, outcomes: list[RunOutcome], failed: int) -> str:
    """The study's closing count, e.g. ``[multi30k] 16 runs: 4 trained, 12 kept (finished earlier), 0 failed``;
    runs neither done nor failed were not started."""
    trained = sum(o.trained for o in outcomes)
    not_started = total - len(outcomes) - failed
    line = (
        f"[{study.name}] {total} runs: {trained} trained, {len(outcomes) - trained} kept (finished earlier), "
        f"{failed} failed"
    )
    return line + (f", {not_started} not started" if not_started else "")
