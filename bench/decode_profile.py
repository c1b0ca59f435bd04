"""Where a decoding job's time goes, beside its arithmetic: the roofline of ``bench.decode_speed``.

    python -m nmt bench decode-profile [--threads 1]

torch.profiler over our cached greedy and beam-5 search of the benchmark model (64 sentences x
exactly 30 target tokens, the job ``bench.decode_speed`` times against CTranslate2). Operators are
grouped by the part of a step they do; each group has its FLOPs (from the operators' shapes), its
measured time and rate, against this machine's measured matrix-product rate (a 1024^3 product on
the same threads) and CTranslate2's float32 total for the same job, timed in the same run.
"""
from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench.common import BOS, EOS, PAD, VOCAB, bench_model_config
from bench.decode_speed import OUTPUT_TOKENS, SENTENCES, compare_ctranslate2, sources
from models.transformer import Transformer
from search.beam import beam_search
from search.greedy import greedy_search

# operator -> part of the step (anything else: "other")
PARTS = {"aten::addmm": "linear layers (addmm)", "aten::mm": "output projection (mm)",
         "aten::bmm": "attention products (bmm)", "aten::_scaled_dot_product_flash_attention_for_cpu": "attention (SDPA)",
         "aten::cat": "growing the self-attention cache, token lists (cat)",
         "aten::index_select": "reordering the cache (index_select)", "aten::topk": "selecting candidates (topk)",
         "aten::_log_softmax": "log-softmax", "aten::copy_": "copies (copy_)",
         "aten::native_layer_norm": "layer norm", "aten::clamp_min": "ReLU", "aten::add": "residual adds"}


def flops(name: str, shapes: list) -> float:
    """Floating-point operations of one call, from its input shapes (matrix products and attention)."""
    if name == "aten::addmm" and len(shapes) >= 3 and len(shapes[1]) == 2 and len(shapes[2]) == 2:
        (m, k), (_, n) = shapes[1], shapes[2]
        return 2.0 * m * k * n
    if name in ("aten::mm", "aten::bmm") and len(shapes) >= 2 and shapes[0] and shapes[1]:
        *batch, m, k = shapes[0]
        n = shapes[1][-1]
        count = 1
        for b in batch:
            count *= b
        return 2.0 * count * m * k * n
    if name == "aten::_scaled_dot_product_flash_attention_for_cpu" and len(shapes) >= 2:
        b, h, tq, dh = shapes[0]
        tk = shapes[1][2]
        return 4.0 * b * h * tq * tk * dh  # q k^T and p v
    return 0.0


def matmul_rate(n: int = 1024, repeats: int = 5) -> float:
    """GFLOP/s of an n^3 float32 matrix product on this process's threads (best of ``repeats``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2.0 * n ** 3 / best / 1e9


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@torch.no_grad()
def profile_job(beam: int) -> tuple[float, dict[str, list[float]]]:
    """(seconds of the best of 3 unprofiled runs, part -> [calls, self seconds, FLOPs]) of one job."""
    torch.manual_seed(0)
    model = Transformer(bench_model_config(), VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).eval()
    src, banned = sources(), (PAD, BOS, EOS)

    def run() -> None:
        if beam == 1:
            greedy_search(model, src, BOS, EOS, 0.0, OUTPUT_TOKENS, banned_ids=banned)
        else:
            beam_search(model, src, BOS, EOS, beam=beam, max_len_a=0.0, max_len_b=OUTPUT_TOKENS, banned_ids=banned)

    run()
    seconds = min(_timed(run) for _ in range(3))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        run()
    parts: dict[str, list[float]] = {}
    for event in prof.events():
        if event.name not in PARTS and not event.name.startswith("aten::"):
            continue
        if event.self_cpu_time_total <= 0:
            continue
        part = PARTS.get(event.name, "other")
        row = parts.setdefault(part, [0, 0.0, 0.0])
        row[0] += 1
        row[1] += event.self_cpu_time_total / 1e6
        row[2] += flops(event.name, event.input_shapes or [])
    return seconds, parts


def table(label: str, seconds: float, parts: dict[str, list[float]], rate: float, ct2_seconds: float) -> str:
    total = sum(row[1] for row in parts.values())
    lines = [f"**{label}**: ours {seconds:.3f} s, CTranslate2 float32 {ct2_seconds:.3f} s (ours at "
             f"{ct2_seconds / seconds:.2f}× its speed); this machine's matrix-product rate {rate:.0f} GFLOP/s", "",
             "| part of the step | calls | FLOPs | time (s) | share | rate (GFLOP/s) | time at the machine's rate (s) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for part, (calls, spent, ops) in sorted(parts.items(), key=lambda kv: -kv[1][1]):
        achieved = f"{ops / spent / 1e9:.0f}" if ops else ""
        bound = f"{ops / rate / 1e9:.3f}" if ops else ""
        lines.append(f"| {part} | {calls:,} | {ops / 1e9:.2f} G | {spent:.3f} | {spent / total:.0%} | {achieved} | {bound} |")
    arithmetic = sum(row[2] for row in parts.values())
    lines.append(f"| all (profiled) | | {arithmetic / 1e9:.2f} G | {total:.3f} | 100% | {arithmetic / total / 1e9:.0f} | "
                 f"{arithmetic / rate / 1e9:.3f} |")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt bench decode-profile", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads for both engines (default 1)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    rate = matmul_rate()
    ct2 = compare_ctranslate2()
    for label, beam, key in (("greedy", 1, "float32_greedy"), ("beam 5", 5, "float32_beam5")):
        seconds, parts = profile_job(beam)
        print(table(f"{label}, {SENTENCES} sentences x {OUTPUT_TOKENS} tokens, {args.threads} thread(s)", seconds,
                    parts, rate, SENTENCES / ct2[f"{key}_sent_per_s"]))
