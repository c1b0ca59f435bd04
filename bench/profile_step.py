"""Where one Multi30k-sized training update spends its time: torch.profiler's top operators by
self CPU time over a few updates of the benchmark model (d_model 256, 3+3 layers, vocabulary
8000) on Multi30k-shaped 4,096-token batches (``bench.common.multi30k_batches``).

    python -m nmt bench profile-step [--scheme rope] [--updates 3] [--reference]

``--reference`` profiles the textbook update (``nn.Dropout``, logits of
every position and ``F.cross_entropy``), for comparison.
"""
from __future__ import annotations

import argparse

from torch.profiler import ProfilerActivity, profile

from bench.common import warmed_up


def profile_updates(scheme: str = "sinusoidal", updates: int = 3, reference: bool = False, rows: int = 20) -> str:
    """The profiler's table (top ``rows`` operators by self CPU time) over ``updates`` updates."""
    model, optimizer, update, batches = warmed_up(updates, scheme, reference)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches:
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
