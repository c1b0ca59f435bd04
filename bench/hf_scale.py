"""A corpus larger than memory through ``data.source: hf``: pairs/s and peak memory of the whole
data stage (load -> hash -> filter -> tokenizer -> encoded cache -> batches).

``python -m nmt bench hf-scale [--pairs N] [--folder DIR]`` writes N synthetic pairs (the built-in
grammar's sentences, repeated with a running number so that every pair differs) as parquet files
in the hub's converted layout, then runs ``train.py --data-only`` on them in a child process and
reports its wall time, pairs/s and its peak memory: the peak resident set (``ru_maxrss``), and,
sampled from ``/proc/PID/status`` every 0.2 s, the peaks of its anonymous part (``RssAnon``: the
memory the process itself holds) and its file-backed part (``RssFile``: pages of the memory-mapped
Arrow files that it has read, which the kernel may drop at any time and reads again on demand).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

from utils.paths import ROOT

ROWS_PER_FILE = 2_000_000


def write_corpus(folder: Path, pairs: int, seed: int = 1) -> None:
    """``folder/fr-en/{train,validation,test}/NNNN.parquet`` with a ``translation`` struct column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from data.synthetic import generate_pairs

    base_src, base_tgt = generate_pairs(20_000, 3, 12, seed)
    struct = pa.struct([("fr", pa.string()), ("en", pa.string())])
    for split, n in (("train", pairs), ("validation", 1000), ("test", 1000)):
        target = folder / "fr-en" / split
        target.mkdir(parents=True, exist_ok=True)
        for part, start in enumerate(range(0, n, ROWS_PER_FILE)):
            rows = range(start, min(n, start + ROWS_PER_FILE))
            fr = pa.array([f"{base_src[i % len(base_src)]} {i}" for i in rows], type=pa.string())
            en = pa.array([f"{base_tgt[i % len(base_tgt)]} {i}" for i in rows], type=pa.string())
            table = pa.table({"translation": pa.StructArray.from_arrays([fr, en], fields=list(struct))})
            pq.write_table(table, target / f"{part:04d}.parquet")


def _status_kb(pid: int) -> dict[str, int]:
    """The ``kB`` fields of ``/proc/PID/status`` (empty once the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {key: int(value.split()[0]) for key, _, value in (line.partition(":") for line in lines)
            if value.strip().endswith("kB")}


def run_measured(command: list[str], interval: float = 0.2, timeline: Path | None = None
                 ) -> tuple[subprocess.CompletedProcess, dict[str, float]]:
    """Run ``command`` to completion; return it with the peaks (MB) of RssAnon and RssFile,
    sampled every ``interval`` seconds, and of the resident set (the kernel's ``ru_maxrss``).
    With ``timeline``, every sample is also written there as "seconds anon_MB file_MB"."""
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peaks = {"RssAnon": 0, "RssFile": 0}
    done = threading.Event()
    start = time.perf_counter()

    def sample() -> None:
        with open(timeline or os.devnull, "w", encoding="utf-8") as out:
            while not done.wait(interval):
                status = _status_kb(child.pid)
                for key in peaks:
                    peaks[key] = max(peaks[key], status.get(key, 0))
                out.write(f"{time.perf_counter() - start:.1f} {status.get('RssAnon', 0) // 1024} "
                          f"{status.get('RssFile', 0) // 1024}\n")

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = child.communicate()
    done.set()
    sampler.join()
    figures = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
               "peak_anon_mb": peaks["RssAnon"] / 1024, "peak_file_mb": peaks["RssFile"] / 1024}
    return subprocess.CompletedProcess(command, child.returncode, stdout, stderr), figures


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt bench hf-scale", description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40_000_000, help="sentence pairs of the generated corpus "
                        "(default 40,000,000)")
    parser.add_argument("--folder", default="runs/bench/hf-scale", help="where the corpus and caches go "
                        "(default runs/bench/hf-scale)")
    parser.add_argument("--timeline", type=Path, help="write the memory samples here (seconds, anon MB, file MB)")
    parser.add_argument("overrides", nargs="*", help="more config overrides for the data stage")
    return parser


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    folder = Path(args.folder)
    corpus = folder / f"corpus-{args.pairs}"
    if not (corpus / "fr-en" / "test").is_dir():
        t0 = time.perf_counter()
        write_corpus(corpus, args.pairs)
        print(f"wrote {args.pairs:,} pairs in {time.perf_counter() - t0:.0f} s to {corpus}", flush=True)
    command = [sys.executable, "train.py", "--config", "configs/synthetic/base.yaml", "--data-only",
               "--run-dir", str(folder / "run"), "data.source=hf", f"data.hf.name={corpus}", "data.hf.config=fr-en",
               "data.test_splits=[test]", f"data.cache_dir={folder / 'cache'}", "tokenizer.vocab_size=8000",
               *args.overrides]
    t0 = time.perf_counter()
    done, memory = run_measured(command, timeline=args.timeline)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"data stage failed:\n{done.stderr[-2000:]}")
    result = {"pairs": args.pairs, "overrides": args.overrides, "seconds": seconds, "pairs_per_s": args.pairs / seconds,
              **memory}
    print(done.stdout, end="")
    print(done.stderr[-4000:], end="", file=sys.stderr)  # the data stage's log, with timestamps
    print(json.dumps(result))
