"""Training throughput by thread arrangement on this machine: one process with 1 thread, one with
2 threads, and two 1-thread processes at once (their total), each doing the project's bare
training update (``bench.common.training_update``) of the benchmark model (d_model 256, 3+3
layers, vocabulary 8000) on Multi30k-shaped batches of 4,096 tokens (``bench.common.multi30k_batches``).
For the study's gain as a whole, one 2-thread process also runs the update as it was before the
fused loss and the CPU dropout mask (``bench.common.reference_update``).

    python -m nmt bench threads [--steps N]

With ``--shared``: whole trainings sharing the machine instead (``bench.shared_machine``: one alone,
two and four side by side; torch's default threads, ``auto``, one thread, passive waiting).

    python -m nmt bench threads --shared [--trials K] [--run-steps N] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import torch

from bench.common import warmed_up


def worker(threads: int, steps: int, start, result, reference: bool = False) -> None:
    """Train ``steps`` updates with ``threads`` intra-op threads after two warm-up updates; put
    the target tokens/s into ``result``. ``reference``: the textbook update."""
    torch.set_num_threads(threads)
    model, opt, update, data = warmed_up(steps, reference=reference)
    start.wait()
    t0 = time.perf_counter()
    tokens = sum(update(model, opt, batch) for batch in data)
    result.put(tokens / (time.perf_counter() - t0))


def measure(processes: int, threads: int, steps: int, reference: bool = False) -> list[float]:
    """Target tokens/s of each of ``processes`` processes of ``threads`` threads running at once."""
    ctx = mp.get_context("spawn")
    start, result = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(threads, steps, start, result, reference)) for _ in range(processes)]
    for p in procs:
        p.start()
    rates = [result.get() for _ in procs]
    for p in procs:
        p.join()
    return rates


def measure_arrangements(steps: int = 8) -> dict:
    """Target tokens/s: one_thread, two_threads, two_processes (total; min = the slower one) and
    reference_two_threads (one 2-thread process of the textbook update)."""
    reference = measure(1, 2, steps, reference=True)[0]
    pair = measure(2, 1, steps)
    return {"one_thread_tokens_per_s": measure(1, 1, steps)[0], "two_threads_tokens_per_s": measure(1, 2, steps)[0],
            "two_processes_tokens_per_s": sum(pair), "two_processes_min_tokens_per_s": min(pair),
            "reference_two_threads_tokens_per_s": reference}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt bench threads", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="timed training steps per arrangement (default 8)")
    parser.add_argument("--shared", action="store_true",
                        help="time whole nmt train runs sharing the machine (bench.shared_machine) instead")
    parser.add_argument("--trials", type=int, default=1, help="with --shared: trials of each arrangement (default 1)")
    parser.add_argument("--run-steps", type=int, default=None,
                        help="with --shared: each run's updates (default: the recipe's 300)")
    parser.add_argument("--out", default=None, help="with --shared: also write the seconds as JSON here")
    return parser


def shared_main(args: argparse.Namespace) -> None:
    """``--shared``: the table, the targets, and the seconds as JSON where ``--out`` says."""
    import json
    from dataclasses import asdict

    from bench import shared_machine
    from utils.io import atomic_write_text

    measured = shared_machine.measure(args.trials, args.run_steps)
    print(shared_machine.table(measured))
    for description, figure, met in shared_machine.targets(measured):
        print(f"{description}: {figure} ({'met' if met else 'NOT met'})")
    if args.out:
        atomic_write_text(args.out, json.dumps([asdict(m) for m in measured], indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.shared:
        return shared_main(args)
    r = measure_arrangements(args.steps)
    one, two, pair = r["one_thread_tokens_per_s"], r["two_threads_tokens_per_s"], r["two_processes_tokens_per_s"]
    print(f"1 process x 1 thread : {one:8,.0f} target tokens/s")
    print(f"1 process x 2 threads: {two:8,.0f} target tokens/s ({two / one:.2f}x one thread)")
    print(f"2 processes x 1 thread: {pair:8,.0f} target tokens/s in total ({pair / two:.2f}x one 2-thread process)")
    ref = r["reference_two_threads_tokens_per_s"]
    print(f"1 process x 2 threads, textbook update: {ref:8,.0f} target tokens/s "
          f"(two 1-thread processes now: {pair / ref:.2f}x)")
