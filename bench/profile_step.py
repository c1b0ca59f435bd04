"""Where one Multi30k-sized training update spends its time: torch.profiler's top operators by
self CPU time over a few updates of the benchmark model (d_model 256, 3+3 layers, vocabulary
8000) on Multi30k-shaped 4,096-token batches (``bench.common.multi30k_batches``).

    python -m nmt bench profile-step [--scheme rope] [--updates 3] [--reference]

``--reference`` profiles the textbook update (``nn.Dropout``, logits of
every position and ``F.cross_entropy``), for comparison.
"""
from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from bench.common import (
    PAD,
    VOCAB,
    as_reference,
    bench_model_config,
    multi30k_batches,
    reference_update,
    training_update,
)
from models.transformer import Transformer


def profile_updates(scheme: str = "sinusoidal", updates: int = 3, reference: bool = False, rows: int = 20) -> str:
    """The profiler's table (top ``rows`` operators by self CPU time) over ``updates`` updates."""
    torch.manual_seed(0)
    model = Transformer(bench_model_config(scheme), VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).train()
    update = reference_update if reference else training_update
    if reference:
        as_reference(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    batches = multi30k_batches(updates + 2)
    for batch in batches[:2]:
        update(model, optimizer, batch)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches[2:]:
            update(model, optimizer, batch)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=48)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt bench profile-step", description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="sinusoidal", help="positional scheme (default sinusoidal)")
    parser.add_argument("--updates", type=int, default=3, help="profiled updates (default 3)")
    parser.add_argument("--reference", action="store_true", help="profile the textbook update instead")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    print(profile_updates(args.scheme, args.updates, args.reference))
