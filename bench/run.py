"""Run every benchmark side by side; write runs/bench/results.json and runs/bench/results.md.

``python -m bench.run [--only train|decode|data] [--out DIR]``. Each case runs in its own
process (its own peak memory); ratios compare cases measured in this one run.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench import data_speed, decode_speed, train_speed
from bench.common import device_name, in_subprocess
from models.positional import SCHEMES
from utils.io import atomic_write_text

BIAS_SCHEMES = ["alibi", "t5", "shaw", "xl", "deberta", "nezha", "fire"]
DECODE_CASES = ["greedy_cached", "greedy_uncached", "beam5_cached", "beam5_uncached"]


def targets(r: dict) -> list[tuple[str, str, bool]]:
    """(target, measured, met) rows of the README's performance targets."""
    rows = []
    if "train.sinusoidal.tokens_per_s" in r:
        ref = r["train.torch_nn_transformer.tokens_per_s"]
        sin = r["train.sinusoidal.tokens_per_s"]
        rows.append(("sinusoidal ≥ 1.0× torch.nn.Transformer tokens/s", f"{sin / ref:.2f}×", sin >= ref))
        rotary = r["train.rope.step_ms"] / r["train.sinusoidal.step_ms"]
        rows.append(("rope step time ≤ 1.2× sinusoidal", f"{rotary:.2f}×", rotary <= 1.2))
        for s in BIAS_SCHEMES:
            ratio = r[f"train.{s}.step_ms"] / r["train.sinusoidal.step_ms"]
            rows.append((f"{s} step time ≤ 1.5× sinusoidal", f"{ratio:.2f}×", ratio <= 1.5))
    if "decode.greedy_cached.sent_per_s" in r:
        g, b = r["decode.greedy_cached.sent_per_s"], r["decode.beam5_cached.sent_per_s"]
        rows.append(("greedy (cached) ≥ 180 sentences/s", f"{g:.0f}", g >= 180))
        rows.append(("beam 5 (cached) ≥ 60 sentences/s", f"{b:.0f}", b >= 60))
        speedup = b / r["decode.beam5_uncached.sent_per_s"]
        rows.append(("beam 5 cached ≥ 5× uncached", f"{speedup:.1f}×", speedup >= 5))
    if "data.pairs_per_s" in r:
        rows.append(("data pipeline ≥ 20,000 pairs/s", f"{r['data.pairs_per_s']:,.0f}", r["data.pairs_per_s"] >= 20000))
        rows.append(("data pipeline peak memory < 2 GB", f"{r['data.peak_rss_mb']:,.0f} MB", r["data.peak_rss_mb"] < 2048))
    return rows


def markdown(r: dict) -> str:
    lines = [f"Device: {r['device']}", "", "| measurement | value |", "| --- | ---: |"]
    for key, value in r.items():
        if key != "device":
            lines.append(f"| `{key}` | {value:,.1f} |" if isinstance(value, float) else f"| `{key}` | {value} |")
    lines += ["", "| target | measured | met |", "| --- | ---: | :---: |"]
    lines += [f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in targets(r)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["train", "decode", "data"], action="append")
    parser.add_argument("--out", default="runs/bench")
    args = parser.parse_args()
    parts = args.only or ["train", "decode", "data"]
    results: dict = {"device": device_name()}
    if "train" in parts:
        schemes = ["torch_nn_transformer", *SCHEMES]
        speeds = in_subprocess(train_speed.measure_all, schemes)
        for scheme in schemes:
            m = {**speeds[scheme], "peak_memory_mb": in_subprocess(train_speed.peak_memory, scheme)}
            for key, value in m.items():
                results[f"train.{scheme}.{key}"] = value
            print(f"train {scheme}: {m['tokens_per_s']:,.0f} tokens/s, {m['step_ms']:.0f} ms/step, "
                  f"peak {m['peak_memory_mb']:,.0f} MB", flush=True)
    if "decode" in parts:
        for case in DECODE_CASES:
            m = in_subprocess(decode_speed.measure, case)
            results[f"decode.{case}.sent_per_s"] = m["sent_per_s"]
            print(f"decode {case}: {m['sent_per_s']:.1f} sentences/s", flush=True)
    if "data" in parts:
        m = in_subprocess(data_speed.measure)
        for key, value in m.items():
            results[f"data.{key}"] = value
        print(f"data: {m['pairs_per_s']:,.0f} pairs/s, peak {m['peak_rss_mb']:,.0f} MB", flush=True)
    out = Path(args.out)
    atomic_write_text(out / "results.json", json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    atomic_write_text(out / "results.md", table)
    print(table)
    print(f"written: {out / 'results.json'}, {out / 'results.md'}")


if __name__ == "__main__":
    main()
