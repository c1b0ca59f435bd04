"""Training throughput by thread arrangement on this machine: one process with 1 thread, one with
2 threads, and two 1-thread processes at once (their total), each doing the bare training step of
the benchmark model (d_model 256, 3+3 layers, vocabulary 8000) on Multi30k-shaped batches of about
4,096 padded tokens (192 sentence pairs of 8-22 tokens a side).

    python -m bench.threads [--steps N]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import torch

from bench.common import PAD, VOCAB, bench_model_config
from bench.train_speed import make_batches
from models.transformer import Transformer

SENTENCES, MIN_LEN, MAX_LEN = 192, 8, 22


def batches(n: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    return make_batches(0, n, SENTENCES, MIN_LEN, MAX_LEN)


def worker(threads: int, steps: int, start, result) -> None:
    """Train ``steps`` steps with ``threads`` intra-op threads after two warm-up steps; put the
    target tokens/s into ``result``."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Transformer(bench_model_config(), VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    data = batches(steps + 2)

    def step(batch) -> int:
        src, tgt_in, tgt = batch
        loss = torch.nn.functional.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt.flatten(), ignore_index=PAD,
                                                 label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return int(tgt.ne(PAD).sum())

    for batch in data[:2]:
        step(batch)
    start.wait()
    t0 = time.perf_counter()
    tokens = sum(step(batch) for batch in data[2:])
    result.put(tokens / (time.perf_counter() - t0))


def measure(processes: int, threads: int, steps: int) -> list[float]:
    """Target tokens/s of each of ``processes`` processes of ``threads`` threads running at once."""
    ctx = mp.get_context("spawn")
    start, result = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(threads, steps, start, result)) for _ in range(processes)]
    for p in procs:
        p.start()
    rates = [result.get() for _ in procs]
    for p in procs:
        p.join()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    one = measure(1, 1, args.steps)[0]
    two = measure(1, 2, args.steps)[0]
    pair = measure(2, 1, args.steps)
    print(f"1 process x 1 thread : {one:8,.0f} target tokens/s")
    print(f"1 process x 2 threads: {two:8,.0f} target tokens/s ({two / one:.2f}x one thread)")
    print(f"2 processes x 1 thread: {sum(pair):8,.0f} target tokens/s in total ({sum(pair) / two:.2f}x one "
          f"2-thread process; each {', '.join(f'{r:,.0f}' for r in pair)})")


if __name__ == "__main__":
    main()
