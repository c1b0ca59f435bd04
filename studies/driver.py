"""A positional-encoding comparison end to end: train each scheme, test it, compare, draw.

Each scheme's run is the family's ``base.yaml`` with ``model.positional.name=<scheme>`` and
``seed=<seed>`` (a family has one base config; no per-scheme copies). Finished runs
are kept, so an interrupted comparison continues where it stopped. Studies with an archive copy
each evaluated run's small files into it (report material) and regenerate
``<archive>/comparison_<test set>.md`` from everything archived, so the table grows across
sittings. Everything goes through the library functions the commands use (``train``,
``evaluate_splits``, ``write_comparison``, the analysis pictures), never through a command.
"""
from __future__ import annotations

import os
import shutil
import signal
import time
import traceback
from concurrent.futures import CancelledError
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from analysis.attention import attention_maps
from analysis.explorer import read_sources, run_record, write_page
from analysis.pe import pe_pictures
from analysis.pictures import two_orders
from analysis.results import length_study, training_curves
from data.pipeline import prepare_data
from experiment.config import Config, recipe_hash
from experiment.decode_config import DecodeConfig, decode_record, decoding_rule, resolve_settings
from experiment.run_dir import RunDir, is_finished, load_run_config, read_manifest
from experiment.trained import load_run
from models.positional import SCHEMES
from scoring.compare import write_comparison
from scoring.cost import cost_table
from scoring.evaluate import evaluate_splits
from scoring.groups import groups_path, write_groups
from scoring.ranking import compare_rankings, scheme_bleu
from scoring.recipe import check_same_recipe
from scoring.record import read_record
from scoring.significance import BASELINE
from studies.catalog import Study, load_studies
from studies.workers import InlinePool, RunNotStarted, StudyStopped, WorkerPool, output_to
from training.loop import train
from utils.errors import UserError
from utils.io import atomic_write_text


def __getattr__(name: str):
    """``STUDIES``: the declared studies (studies/<name>.yaml), read when asked for, not at import,
    so that a bad declaration is a command's one-line error rather than an import traceback."""
    if name == "STUDIES":
        return load_studies()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_dir_of(study: Study, scheme: str, seed: int) -> Path:
    """``<out>/<scheme>`` for seed 1 (every study's default), ``<out>/<scheme>-seed<N>`` otherwise.

    The name depends on the seed alone, not on how many seeds are asked for, so adding seeds to a
    finished study keeps (and archives beside) the runs it already has.
    """
    return study.out / (scheme if seed == 1 else f"{scheme}-seed{seed}")


def finished(run_dir: Path) -> bool:
    """The run's training ended at its budget (or early stopping), not stopped by a signal."""
    return is_finished(read_manifest(run_dir))


def evaluated(run_dir: Path, settings: DecodeConfig) -> bool:
    """Every configured test split has results newer than the best checkpoint, decoded as
    ``settings`` say (changed decoding settings re-evaluate a run; they never retrain it)."""
    best = RunDir(run_dir).best
    wanted = decoding_rule(decode_record(settings, 0))
    for testset in load_run_config(run_dir).data.test_splits:
        path = RunDir(run_dir).evaluation(testset).record
        if not (best.is_file() and path.is_file() and path.stat().st_mtime >= best.stat().st_mtime):
            return False
        if decoding_rule(read_record(path).decode) != wanted:
            return False
    return True


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


def archive_run(run_dir: Path, target: Path) -> None:
    """Copy the small files of a finished, evaluated run (config, manifest, metrics, eval/)."""
    source, copy = RunDir(run_dir), RunDir(target)
    target.mkdir(parents=True, exist_ok=True)
    for path in source.archived:
        if path.is_file():
            shutil.copy2(path, copy.path / path.name)
    if source.evaluations.is_dir():
        shutil.copytree(source.evaluations, copy.evaluations, dirs_exist_ok=True)


def archived_runs(study: Study) -> list[Path]:
    """The run folders under the study's archive (it grows across sittings), sorted by name."""
    if study.archive is None or not study.archive.is_dir():
        return []
    return sorted(d for d in study.archive.iterdir() if RunDir(d).config.is_file())


def _archived_or_fail(study: Study) -> list[Path]:
    runs = archived_runs(study)
    if not runs:
        where = study.archive or f"the '{study.name}' study (it keeps no archive)"
        raise UserError(f"no archived runs under {where}; run the study first")
    return runs


def first_seed_tables(runs: list[Path], testset: str, archive: Path, metrics: list[str] | None = None) -> list[Path]:
    """What the table said with its first seed alone, beside what it says with every seed: for an
    archive with several seeds of some scheme, ``comparison_seed<S>_<test set>.md`` (+ CSV) of the
    runs of the first seed ``S``, and ``ranking_seed<S>_vs_all_<test set>.md``, that order beside the
    order of the means over all seeds (Kendall's tau-b, each gap to sinusoidal and how it moved).
    None when every scheme has one seed or the first seed lacks sinusoidal or a second scheme."""
    seeds = {run: load_run_config(run).seed for run in runs}
    first = min(seeds.values())
    first_runs = [run for run in runs if seeds[run] == first]
    first_bleu = scheme_bleu(first_runs, testset)
    if len(first_runs) == len(runs) or len(first_bleu) < 2 or BASELINE not in first_bleu:
        return []
    table, _ = write_comparison(first_runs, testset, archive / f"comparison_seed{first}_{testset}.md", metrics=metrics)
    ranking = atomic_write_text(archive / f"ranking_seed{first}_vs_all_{testset}.md", compare_rankings(
        first_bleu, scheme_bleu(runs, testset), (f"seed {first} alone", "mean over all seeds")))
    return [table, ranking]


def ranking_files(ranking: Path, other_runs: list[Path], runs: list[Path], testset: str,
                  names: tuple[str, str]) -> Path:
    """Two studies' orders of their schemes on ``testset``: the table (``ranking``, Kendall's tau-b)
    and beside it the picture of each scheme's BLEU in both (same name, .png)."""
    first, second = scheme_bleu(other_runs, testset), scheme_bleu(runs, testset)
    atomic_write_text(ranking, compare_rankings(first, second, names))
    two_orders(first, second, names, f"Each scheme's BLEU in both studies ({testset})", ranking.with_suffix(".png"))
    return ranking


def write_archive_tables(study: Study, studies: dict[str, Study] | None = None) -> list[Path]:
    """Regenerate ``<archive>/comparison_<test set>.md`` (+ CSV) and its significance groups
    (``groups_<test set>.md`` + CSV, ``scoring.groups``) from the archived runs alone, for
    a study ``ranked_against`` another (of ``studies``, by default the declared ones),
    ``<archive>/ranking_vs_<other>_<test set>.md`` (+ the picture of both orders, .png), for an
    archive with several seeds the first seed's table and order beside all seeds'
    (``first_seed_tables``), and ``<archive>/cost.md``
    (what training the archived runs cost, ``scoring.cost``)."""
    runs = _archived_or_fail(study)
    check_same_recipe(runs)
    other = other_runs = None
    if study.ranked_against:
        studies = load_studies() if studies is None else studies
        if study.ranked_against not in studies:
            raise UserError(f"the '{study.name}' study is ranked against '{study.ranked_against}', which is not a study")
        other = studies[study.ranked_against]
        other_runs = _archived_or_fail(other)
        names = tuple(
            f"{s.name}, {load_run_config(r[0]).train.max_steps} updates"
            for s, r in ((other, other_runs), (study, runs))
        )
    tables = []
    for testset in load_run_config(runs[0]).data.test_splits:
        markdown, _ = write_comparison(runs, testset, study.archive / f"comparison_{testset}.md", metrics=study.metrics)
        print(markdown.read_text(encoding="utf-8"), end="")
        groups, _ = write_groups(runs, testset, groups_path(markdown))
        print(groups.read_text(encoding="utf-8"), end="")
        tables += [markdown, groups]
        if other is not None:
            ranking = ranking_files(study.archive / f"ranking_vs_{other.name}_{testset}.md", other_runs, runs,
                                    testset, names)
            print(ranking.read_text(encoding="utf-8"), end="")
            tables += [ranking, ranking.with_suffix(".png")]
        for table in first_seed_tables(runs, testset, study.archive, study.metrics):
            print(table.read_text(encoding="utf-8"), end="")
            tables.append(table)
    cost = atomic_write_text(study.archive / "cost.md", cost_table(runs))
    print(cost.read_text(encoding="utf-8"), end="")
    return tables + [cost]


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


def train_and_test(study: Study, scheme: str, seed: int, device: str = "cpu") -> RunOutcome:
    """Train one run of the study (or keep/resume it) and test it; archive it if the study does."""
    run_dir = run_dir_of(study, scheme, seed)
    cfg = study.config(scheme, seed)
    check_same_config(run_dir, cfg)
    kept = finished(run_dir)
    if kept:
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
    if not evaluated(run_dir, settings):
        run = load_run(run_dir, "best", device)
        for result in evaluate_splits(run, None, settings, device):
            print(result.summary(), flush=True)
    if study.archive is not None:
        archive_run(run_dir, study.archive / run_dir.name)
    return RunOutcome(run_dir, trained=not kept)


def default_parallel(device: str) -> int:
    """Runs at once by default: two 1-thread processes on a CPU with at least two cores (measured
    1.0-1.3x the updates/s of one 2-thread process: ``python -m nmt bench threads``), else one."""
    return 2 if device == "cpu" and (os.cpu_count() or 1) >= 2 else 1


def _train_and_test_logged(study: Study, scheme: str, seed: int, device: str) -> RunOutcome:
    """``train_and_test`` in a worker process, its output in ``<out>/logs/<run>.log``."""
    from utils.cli import setup_logging

    with output_to(run_log(study, scheme, seed)):
        setup_logging()
        try:
            return train_and_test(study, scheme, seed, device)
        except BaseException:
            traceback.print_exc()  # into the run's log; the study names the run and the log
            raise


def run_log(study: Study, scheme: str, seed: int) -> Path:
    return study.out / "logs" / f"{run_dir_of(study, scheme, seed).name}.log"


def queue(study: Study) -> list[tuple[str, int]]:
    """The (scheme, seed) runs in training order: every scheme's first seed, then every scheme's
    second, ..., so that a study stopped between runs leaves a table with all its rows. Within a
    round, schemes that act inside attention (slower to train) go first and the ones that only add
    to the embeddings last, so that parallel workers finish their last runs close together."""
    def embeddings_only(scheme: str) -> bool:
        return SCHEMES[scheme].where_it_acts() in ("embeddings", "—") if scheme in SCHEMES else False

    return [(scheme, seed) for seed in study.seeds
            for scheme in sorted(study.schemes, key=embeddings_only)]  # stable: declared order otherwise


def declared_order(study: Study, run_dirs: list[Path]) -> list[Path]:
    """``run_dirs`` in the study's declared order (schemes within seeds), whatever order they trained in."""
    rank = {run_dir_of(study, scheme, seed): i for i, (seed, scheme) in
            enumerate((seed, scheme) for seed in study.seeds for scheme in study.schemes)}
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


def stopped_by(received: signal.Signals, what: str) -> UserError:
    """The one-line error of a study stopped by ``received``: ``what`` says what is done and what to do;
    its exit code is the shell's for a process ended by that signal (128 + its number)."""
    stop = UserError(f"stopped by {received.name}: {what}")
    stop.exit_code = 128 + received
    return stop


def worker_threads(parallel: int) -> int:
    """Threads of each of ``parallel`` workers: this process's threads shared out (at least one)."""
    return max(1, torch.get_num_threads() // parallel)


def train_all(study: Study, device: str = "cpu", parallel: int = 1, pool: WorkerPool | None = None) -> list[Path]:
    """Every scheme x seed of the study (``queue`` order), ``parallel`` runs at a time (in worker
    processes sharing this process's threads, each run's output in ``<out>/logs/<run>.log``; on
    ``pool`` when given, which stays open, else on a pool of its own); the run folders in the
    declared order. Ends with a line counting the runs trained, kept and failed."""
    runs = queue(study)
    if parallel <= 1 or len(runs) == 1:
        outcomes, failed = [], 0
        try:
            for scheme, seed in runs:
                outcomes.append(train_and_test(study, scheme, seed, device))
        except BaseException:
            failed = 1  # the run that raised stops the study
            raise
        finally:
            print(tally(study, len(runs), outcomes, failed), flush=True)
        return declared_order(study, [o.run_dir for o in outcomes])
    for seed in study.seeds:  # fill the data caches once, before the workers would race to
        cfg = study.config(study.schemes[0], seed)
        prepare_data(cfg.data, cfg.tokenizer, cfg.seed)
    threads = worker_threads(parallel)
    print(
        f"[{study.name}] {len(runs)} runs, {parallel} at a time with {threads} thread(s) each; "
        f"logs in {study.out / 'logs'}",
        flush=True,
    )
    with nullcontext(pool) if pool is not None else WorkerPool(parallel, threads) as pool:
        futures = pool.submit_all(_train_and_test_logged, [(study, scheme, seed, device) for scheme, seed in runs])
        outcomes, failures, not_started = [], [], 0
        for (scheme, seed), future in zip(runs, futures):
            if pool.received:  # runs still queued in this process are not started either
                future.cancel()
            try:
                outcomes.append(future.result())
            except (CancelledError, RunNotStarted):
                not_started += 1
            except Exception as err:  # noqa: BLE001 (one run's failure; the others go on)
                reason = str(err).splitlines()[0] if str(err) else type(err).__name__
                failures.append(
                    f"{run_dir_of(study, scheme, seed)} failed ({reason}; see {run_log(study, scheme, seed)})"
                )
                print(f"[{study.name}] {failures[-1]}", flush=True)
            else:
                print(
                    f"[{study.name}] {outcomes[-1].run_dir}: "
                    f"{'trained and tested' if outcomes[-1].trained else 'finished earlier, kept'}",
                    flush=True,
                )
    # Read before the count is announced: a signal that comes after the count (the tail has begun)
    # is the tail's to report, as `run_study` does; read after it, a signal racing the print was
    # reported as one that stopped runs.
    received = pool.received
    print(tally(study, len(runs), outcomes, len(failures)), flush=True)
    run_dirs = declared_order(study, [o.run_dir for o in outcomes])
    if received:
        raise stopped_by(
            received,
            f"{len(run_dirs)} of {len(runs)} runs finished, {len(failures)} stopped or failed (see their logs; "
            f"a stopped run saved its last.pt), {not_started} not started; start the study again to continue",
        )
    if failures:
        raise UserError(f"{len(failures)} of {len(runs)} runs failed: " + "; ".join(failures))
    return run_dirs


def page_inputs(run_dirs: list[Path], sentences: int = 20) -> tuple[list[Path], list[str]]:
    """What a study's explorer page shows: each scheme's first run (a page of every seed would repeat
    itself) and the first ``sentences`` sources of the first test set."""
    first_of_group: dict[str, Path] = {}
    for run_dir in run_dirs:
        first_of_group.setdefault(load_run_config(run_dir).model.positional.name, run_dir)
    testset = load_run_config(run_dirs[0]).data.test_splits[0]
    return list(first_of_group.values()), read_sources(RunDir(run_dirs[0]).evaluation(testset).sources, sentences)


def best_run(run_dirs: list[Path], testset: str) -> Path:
    """The run with the highest BLEU on ``testset``."""
    return max(run_dirs, key=lambda d: read_record(RunDir(d).evaluation(testset).record).bleu)


def best_run_maps(run_dir: Path, text: str, out: Path, device: str = "cpu"):
    """``attention_maps`` of ``text`` by the run's best checkpoint, decoded as the run's config says."""
    run = load_run(run_dir, "best", device)
    return attention_maps(run, text, resolve_settings(run.cfg.decode), out)


def run_study(study: Study, device: str = "cpu", parallel: int = 1) -> Path:
    """Every scheme x seed of the study (``train_all``), then the comparison tables, the pictures
    and the explorer page. In a parallel study the workers stay for the pictures and the page's
    records, which they compute while this process writes the tables."""
    started = time.perf_counter()
    for scheme in study.schemes:
        study.config(scheme, study.seeds[0])  # an unknown scheme stops the study before any training
    workers = WorkerPool(parallel, worker_threads(parallel)) if parallel > 1 else None
    with workers if workers is not None else nullcontext():
        run_dirs = train_all(study, device, parallel, workers)
        pool = workers or InlinePool()
        try:
            tables, page, pictures = write_tail(study, run_dirs, pool, device)
        except (StudyStopped, RunNotStarted) as err:  # a worker's job stopped or refused by the signal
            if not pool.received:
                raise
            raise stopped_by(
                pool.received,
                f"all {len(run_dirs)} runs finished, the pictures and explorer page not all written; start the "
                "study again to write them (its finished runs are kept)",
            ) from err
    finish_study(study, tables, page, pictures, started)
    return study.out


def finish_study(study: Study, tables: list[Path], page: Path, pictures: Path, started: float) -> None:
    """The end of a study whose runs are done and whose tail is written: the archive's tables, and
    the closing line naming what was written."""
    print(f"explorer: {page}")
    if study.archive is not None:
        tables += write_archive_tables(study)
    minutes = (time.perf_counter() - started) / 60
    print(
        f"\n[{study.name}] done in {minutes:.1f} min. Comparison tables: "
        + ", ".join(map(str, tables))
        + f"; pictures: {pictures}"
    )


def write_tail(study: Study, run_dirs: list[Path], pool: WorkerPool | InlinePool,
                device: str) -> tuple[list[Path], Path, Path]:
    """What a study writes after its runs: the comparison tables here, the BLEU-by-length study, the
    PE pictures, the best run's attention maps and the explorer page's records on ``pool``; returns
    the tables, the page and the pictures' folder."""
    test_splits = load_run_config(run_dirs[0]).data.test_splits
    pictures = study.out / "pictures"
    page_runs, sources = page_inputs(run_dirs)
    best = best_run(run_dirs, test_splits[0])
    # the longest jobs first: the workers take them in order
    by_length = pool.submit(length_study, run_dirs, pictures)
    pe = pool.submit(pe_pictures, ["all"], pictures / "pe")
    maps = pool.submit(best_run_maps, best, study.attention_text, pictures / f"attention_{best.name}", device)
    records = [pool.submit(run_record, run_dir, sources, device) for run_dir in page_runs]
    for testset in test_splits:
        markdown, _ = write_comparison(run_dirs, testset, study.out / f"comparison_{testset}.md", metrics=study.metrics)
        print(markdown.read_text(encoding="utf-8"), end="")
        write_groups(run_dirs, testset, groups_path(markdown))
    curves = training_curves(run_dirs, pictures)
    length_pictures, best_maps = by_length.result(), maps.result()
    print(*length_pictures, curves, sep="\n")
    pe.result()
    print(f"attention maps of {best.name}: {best_maps.translation!r} -> {best_maps.stats_path.parent}")
    tables = [study.out / f"comparison_{t}.md" for t in test_splits]
    page = write_page([r.result() for r in records], sources, study.out / "index.html", f"Study '{study.name}'",
                      [t.with_suffix(".csv") for t in tables], [curves, length_pictures[0]])
    return tables, page, pictures
