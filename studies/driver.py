"""A positional-encoding comparison end to end: train each run, test it, compare, draw.

``run_study`` is a study's one lifecycle, whatever executor trains its runs
(``studies.executors``): check every run's config, run them (finished runs are kept, so an
interrupted study continues where it stopped), then the tail — the comparison tables, the
BLEU-by-length study, the PE pictures, the best run's attention maps and the explorer page; a
study's tables are made once (``studies.tables.write_tables``), in its archive when it keeps one. Everything goes
through the library functions the commands use, never through a command.
"""
from __future__ import annotations

import functools
import hashlib
import time
from concurrent.futures import Future
from pathlib import Path

from analysis.attention import attention_maps
from analysis.explorer import read_sources, run_record, write_page
from analysis.pe import trained_pe_pictures
from analysis.results import length_study, training_curves
from experiment.decode_config import resolve_settings
from experiment.run_dir import RunDir, check_archive_layout, load_run_config
from experiment.trained import load_run
from scoring.record import read_record
from studies.catalog import Study, load_studies
from studies.executors import executor_for, stopped_by
from studies.ledger import LedgerLock
from studies.runs import label_of, with_variants
from studies.tables import archived_or_fail, write_tables
from studies.workers import InlinePool, RunNotStarted, StudyStopped, WorkerPool
from utils.io import atomic_write_text


def __getattr__(name: str):
    """``STUDIES``: the declared studies (studies/<name>.yaml), read when asked for, not at import,
    so that a bad declaration is a command's one-line error rather than an import traceback."""
    if name == "STUDIES":
        return load_studies()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_study(study: Study, device: str = "cpu", parallel: int | None = 1, tail: bool = True) -> Path:
    """Every run of the study on its executor (``study.executor.name``; ``parallel``: the local
    executor's runs at once, None for its default), then the tail: the comparison tables, the
    pictures and the explorer page, and the archive's tables — once per change of the runs or the
    study's table settings (``tail_key``), under a lock, so that two commands watching one study
    write it once. In a parallel study the workers stay for the pictures and the page's
    records, which they compute while this process writes the tables. ``tail=False``: the runs
    alone (trained, tested, archived), for a lent machine whose time is short; ``--table`` makes
    the archive's tables later from the archive."""
    started = time.perf_counter()
    if study.archive is not None:
        check_archive_layout(study.archive)  # before any training: its runs could not be archived
    for label in study.schemes:
        for seed in study.seeds_of(label)[:1]:  # an unknown scheme or override stops the study before any training
            study.config(label, seed)
            for variant in study.variants_of(label):
                study.variant_config(label, seed, variant)
    with executor_for(study, device, parallel) as executor:
        run_dirs = executor.run()
        study, pool = executor.study, executor.pool
        if not tail:
            print(f"[{study.name}] {len(run_dirs)} runs finished; no tables, pictures or page written (--no-tail)",
                  flush=True)
            return study.out
        with LedgerLock(study.out, TAIL_LOCK):  # two commands watching the same study: one writes the tail
            key = tail_key(study, run_dirs)
            if tail_written(study, key):
                print(f"[{study.name}] the tables, pictures and explorer page under {study.out} are those of these "
                      f"{len(run_dirs)} runs already: kept", flush=True)
                return study.out
            pool.stop_at_once = True  # the tables are this process's own work: a stop ends them now
            try:
                tables, page, pictures = write_tail(study, run_dirs, pool, device)
            except (StudyStopped, RunNotStarted) as err:  # stopped here, or a worker's job stopped or refused
                if not pool.received:
                    raise
                raise stopped_by(
                    pool.received,
                    f"all {len(run_dirs)} runs finished, the tables, pictures and explorer page not all written; "
                    "start the study again to write them (its finished runs are kept)",
                ) from err
            finally:
                pool.stop_at_once = False
            finish_study(study, tables, page, pictures, started)
            atomic_write_text(study.out / TAIL_STAMP, key)
    return study.out


TAIL_LOCK, TAIL_STAMP = ".tail.lock", ".tail"  # in the study's output folder


def tail_key(study: Study, run_dirs: list[Path]) -> str:
    """What the tail is made of: the runs (each one's config, manifest, metrics log and evaluation
    records, by their modification times) and the study's settings that shape the tables and pictures."""
    parts = [str(study.archive), study.attention_text, repr(study.metrics), repr(sorted(study.compare.items())),
             str(study.by_length), repr(study.ranked_against),
             repr({name: (v.overrides, v.rows) for name, v in study.variants.items()})]  # the key tails were stamped with
    for run_dir in with_variants(study, run_dirs):
        files = [*RunDir(run_dir).archived, *sorted(RunDir(run_dir).evaluations.rglob("*.json"))]
        parts += [str(run_dir), *(f"{f.name}:{f.stat().st_mtime_ns}" for f in files if f.is_file())]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def tail_written(study: Study, key: str) -> bool:
    """The tail was written for exactly ``key`` and its page is still there (a study whose runs and
    settings did not change since writes it once, however many commands watch or re-run it)."""
    stamp = study.out / TAIL_STAMP
    return (stamp.is_file() and stamp.read_text(encoding="utf-8") == key and (study.out / "index.html").is_file()
            and (study.archive is None or (study.archive / "cost.md").is_file()))


def finish_study(study: Study, tables: list[Path], page: Path, pictures: Path, started: float) -> None:
    """The end of a study whose runs are done and whose tail is written: the archive's tables, and
    the closing line naming what was written."""
    print(f"explorer: {page}")
    if study.archive is not None:
        tables = [study.archive / table.name for table in tables]
    minutes = (time.perf_counter() - started) / 60
    print(
        f"\n[{study.name}] done in {minutes:.1f} min. Comparison tables: "
        + ", ".join(map(str, tables))
        + f"; pictures: {pictures}"
    )


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


def write_tail(study: Study, run_dirs: list[Path], pool: WorkerPool | InlinePool,
               device: str) -> tuple[list[Path], Path, Path]:
    """What a study writes after its runs: the comparison tables here, the BLEU-by-length study, the
    PE pictures, the best run's attention maps and the explorer page's records on ``pool``; returns
    the tables, the page and the pictures' folder."""
    test_splits = load_run_config(run_dirs[0]).data.test_splits
    pictures = study.out / "pictures"
    page_runs, sources = page_inputs(run_dirs)
    best = best_run(run_dirs, test_splits[0])
    rows = with_variants(study, run_dirs)  # the tables' runs: each run and its decodes under the study's variants
    # the longest jobs first: the workers take them in order
    by_length = pool.submit(functools.partial(length_study, labels={run: label_of(run) for run in rows}), rows, pictures)
    pe = pool.submit(trained_pe_pictures, page_runs, pictures / "pe")
    maps = pool.submit(best_run_maps, best, study.attention_text, pictures / f"attention_{best.name}", device)
    records = [pool.submit(run_record, run_dir, sources, device) for run_dir in page_runs]
    tables = comparison_tables(study, rows)
    curves = drawn(study, "the training curves", InlinePool().submit(training_curves, run_dirs, pictures))
    length_pictures = drawn(study, "BLEU by source length", by_length) or []
    best_maps = drawn(study, f"the attention maps of {best.name}", maps)
    print(*length_pictures, *([curves] if curves else []), sep="\n")
    drawn(study, "the positional encodings' pictures", pe)
    if best_maps is not None:
        print(f"attention maps of {best.name}: {best_maps.translation!r} -> {best_maps.stats_path.parent}")
    page = write_page([r.result() for r in records], sources, study.out / "index.html", f"Study '{study.name}'",
                      [t.with_suffix(".csv") for t in tables], [p for p in (curves, *length_pictures[:1]) if p])
    return tables, page, pictures


def comparison_tables(study: Study, rows: list[Path]) -> list[Path]:
    """Every table of the study (``studies.tables.write_tables``), once: in its archive from the
    archived runs when it keeps one (this sitting's among them), each comparison table then copied
    into the output folder beside the runs; else in the output folder from ``rows``. Each comparison
    table is printed; returns them (in the output folder)."""
    folder = study.archive if study.archive is not None else study.out
    made = write_tables(study, archived_or_fail(study) if study.archive is not None else rows, folder)
    shown = []
    for table in (t for t in made if t.name.startswith("comparison_") and t.suffix == ".md"):
        if folder != study.out:
            for path in (table, table.with_suffix(".csv")):
                atomic_write_text(study.out / path.name, path.read_text(encoding="utf-8"))
        print(table_head(table.read_text(encoding="utf-8"), study.out / table.name), flush=True)
        shown.append(study.out / table.name)
    return shown


SHOWN_ROWS = 5  # rows of each comparison table the terminal shows; the files hold all of them


def table_head(text: str, path: Path, rows: int = SHOWN_ROWS) -> str:
    """A Markdown table's header and first ``rows`` rows, then one line naming ``path``, where the
    whole table and its caption are (the terminal's closing summary stays short)."""
    lines = text.split("\n")
    table = lines[:next((i for i, line in enumerate(lines) if not line.startswith("|")), len(lines))]
    more = len(table) - 2 - rows
    rest = f"… {more} more rows; the whole table and its caption: {path}" if more > 0 else f"(caption: {path})"
    return "\n".join([*table[:2 + rows], rest])


def drawn(study: Study, what: str, future: Future):
    """A picture job's result, or None with one line saying what was skipped and why: a picture
    that cannot be drawn never fails a study whose runs finished (a stop signal still does)."""
    try:
        return future.result()
    except (StudyStopped, RunNotStarted):
        raise
    except Exception as err:  # noqa: BLE001 (any failure of a picture: named, skipped)
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"[{study.name}] skipped {what}: {reason}", flush=True)
        return None


