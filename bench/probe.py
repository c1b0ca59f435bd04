"""The machine-speed probe printed with every timing: torch.nn.Transformer's training step
(``bench.train_speed.TorchTransformer``: d_model 256, 4 heads, 3+3 layers, ffn 1024, vocabulary
8000, F.cross_entropy with label smoothing 0.1, Adam) on the 8 fixed 64-sentence batches of
``bench.train_speed.make_batches``, in target tokens/s (median of 8 steps after 2 warm-up steps),
with the process's default threads. This machine's speed varies up to threefold between days:
a figure divided by the probe measured in the same run can be compared across days.

    python -m nmt bench probe
"""
from __future__ import annotations

import argparse
import statistics

import torch

from bench.common import PAD, device
from bench.train_speed import WARMUP, build, make_batches, step


def probe(steps: int = 8) -> float:
    """Target tokens/s of torch.nn.Transformer's training step on the fixed batches."""
    dev = device()
    model, opt = build("torch_nn_transformer", dev)
    batches = [tuple(t.to(dev) for t in b) for b in make_batches()]
    amp = torch.bfloat16 if dev.type == "cuda" else None
    for batch in batches[:WARMUP]:
        step(model, opt, batch, amp)
    rates = []
    for i in range(steps):
        batch = batches[i % len(batches)]
        rates.append(int(batch[2].ne(PAD).sum()) / step(model, opt, batch, amp))
    return statistics.median(rates)


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog="python -m nmt bench probe", description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    build_parser().parse_args(argv)
    print(f"probe: torch.nn.Transformer training step {probe():,.0f} target tokens/s on {torch.get_num_threads()} "
          f"threads")
