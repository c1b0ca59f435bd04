"""The first use on a device: Transformer-base per scheme, trained by the project's trainer.

For each scheme, ``configs/iwslt2017/base.yaml`` with ``model.positional.name=<scheme>`` (Transformer-base: d_model 512, 8 heads, 6+6
layers, 16k joint vocabulary, 4,096-token batches, mixed precision on CUDA) with the built-in
synthetic corpus standing in for IWSLT2017 (232,825 training pairs of 3-40 words, the size of
IWSLT2017 fr-en's training split), trained for ``--updates`` updates by the engine train.py uses.
A short linear warm-up to 5e-4 replaces the recipe's 4,000-update warm-up so the loss visibly
falls within the check. Checks, per scheme: every loss finite; the teacher-forced loss of a
fixed held-out batch lower after the updates than before; cached == uncached greedy decoding and
beam 1 == greedy on the device. Prints target tokens/s, updates/s and peak device memory (CPU: the process's peak
resident memory), and the time an epoch of 232,825 pairs and the 20-epoch recipe would take at that speed.

    python -m bench.gpu_check [--schemes S ...] [--updates N] [--device cuda] [key=value ...]   (make gpu-check)

Exits 1 when a check fails (a line per failure), 0 otherwise.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from ignite.engine import Events

from bench.common import peak_rss_mb
from data.pipeline import make_loader, prepare_data
from experiment.config import Config, load_config
from experiment.trained import build_model
from models.positional import SCHEMES
from search.beam import beam_search
from search.greedy import greedy_search
from training.engine import autocast_dtype, create_trainer, train_loss
from training.handlers import StepBudget, TrainState
from training.schedules import lr_lambda
from utils.cli import run_main
from utils.device import device_name, resolve_device

ROOT = Path(__file__).resolve().parent.parent
IWSLT_TRAIN_PAIRS = 232_825
WARMUP = 2


def check_config(scheme: str, updates: int, train_pairs: int, overrides: list[str] = ()) -> Config:
    return load_config(ROOT / "configs" / "iwslt2017" / "base.yaml", [
        f"model.positional.name={scheme}", "data.source=synthetic", "data.test_splits=[test]",
        f"data.synthetic.train={{size: {train_pairs}, min_words: 3, max_words: 40}}",
        "data.synthetic.validation={size: 64, min_words: 3, max_words: 40}",
        "data.synthetic.test={size: 64, min_words: 3, max_words: 40}",
        "train.schedule=linear", "train.lr=5e-4", f"train.warmup_steps={max(1, updates // 2)}",
        f"train.max_steps={updates + WARMUP}", *overrides])


def held_out_loss(model, batch, cfg: Config, pad_id: int, device: torch.device) -> float:
    model.eval()
    with torch.no_grad():
        loss, ntokens = train_loss(model, batch.to(device), pad_id, cfg.train.label_smoothing,
                                   autocast_dtype(cfg.train, device))
    return loss.item() / max(ntokens, 1)


def check_scheme(scheme: str, updates: int, device: torch.device, train_pairs: int,
                 overrides: list[str] = ()) -> tuple[dict, list[str]]:
    """(figures, failed checks) of one scheme."""
    cfg = check_config(scheme, updates, train_pairs, overrides)
    data = prepare_data(cfg.data, cfg.tokenizer, cfg.seed)
    tok = data.tokenizer
    loader = make_loader(data.encoded[cfg.data.train_split], tok, cfg.train, shuffle=True, seed=cfg.seed)
    held_out = next(iter(make_loader(data.encoded[cfg.data.valid_split], tok, cfg.train, shuffle=False,
                                     seed=cfg.seed)))
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, tok).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr, betas=tuple(cfg.train.betas), eps=cfg.train.eps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, len(loader)))
    amp = autocast_dtype(cfg.train, device)
    scaler = torch.amp.GradScaler(device.type, enabled=amp == torch.float16)
    state = TrainState()
    trainer = create_trainer(model, optimizer, scheduler, scaler, cfg.train, tok.pad_id, device, state.guard)
    StepBudget(state, cfg.train.max_steps).attach(trainer)
    timing = {"tokens": 0, "start": 0.0}

    @trainer.on(Events.ITERATION_COMPLETED)
    def count(engine) -> None:
        if engine.state.iteration == WARMUP:
            if device.type == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            timing["start"] = time.perf_counter()
        elif engine.state.iteration > WARMUP:
            timing["tokens"] += engine.state.output["ntokens"]

    failures = []
    before = held_out_loss(model, held_out, cfg, tok.pad_id, device)
    trainer.run(loader, max_epochs=1)
    state.guard.check()  # a non-finite loss stops the check with its own message
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - timing["start"]
    after = held_out_loss(model, held_out, cfg, tok.pad_id, device)
    if not after < before:
        failures.append(f"{scheme}: held-out loss did not fall ({before:.3f} -> {after:.3f})")
    model.eval()
    src = held_out.src[:16].to(device)
    banned = (tok.pad_id, tok.bos_id)
    with torch.no_grad():
        greedy = greedy_search(model, src, tok.bos_id, tok.eos_id, 1.0, 5, banned_ids=banned)
        if greedy != greedy_search(model, src, tok.bos_id, tok.eos_id, 1.0, 5, use_cache=False, banned_ids=banned):
            failures.append(f"{scheme}: cached and uncached greedy decoding differ on {device}")
        beam1 = beam_search(model, src, tok.bos_id, tok.eos_id, beam=1, max_len_a=1.0, max_len_b=5, banned_ids=banned,
                            stopping="first_k")  # fairseq's rule: beam 1 is greedy
        if [h[0].tokens for h in beam1] != greedy:
            failures.append(f"{scheme}: beam 1 differs from greedy on {device}")
    tokens_per_s = timing["tokens"] / seconds
    updates_per_s = updates / seconds
    epoch_tokens = float(data.encoded[cfg.data.train_split].tgt_lengths.sum()) * IWSLT_TRAIN_PAIRS / train_pairs
    peak = torch.cuda.max_memory_allocated(device) / 2 ** 20 if device.type == "cuda" else peak_rss_mb()
    return {"tokens_per_s": tokens_per_s, "updates_per_s": updates_per_s, "peak_mb": peak,
            "loss_before": before, "loss_after": after, "epoch_min": epoch_tokens / tokens_per_s / 60,
            "recipe_h": cfg.train.max_epochs * epoch_tokens / tokens_per_s / 3600}, failures


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--schemes", nargs="+", choices=SCHEMES, default=list(SCHEMES), metavar="SCHEME",
                        help="schemes to check (default: every registered one)")
    parser.add_argument("--updates", type=int, default=30, help="timed updates per scheme, after 2 warm-up ones (default 30)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="cuda, cuda:1, ... (default: cuda where there is one, else cpu)")
    parser.add_argument("--train-pairs", type=int, default=IWSLT_TRAIN_PAIRS,
                        help="synthetic training pairs (default: IWSLT2017's count; the epoch time is scaled to it)")
    parser.add_argument("overrides", nargs="*", help="config overrides (key=value) for every scheme")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_intermixed_args(argv)
    device = resolve_device(args.device)
    print(
        f"device: {device_name(device)}; Transformer-base{' with ' + ' '.join(args.overrides) if args.overrides else ''}, "
        f"{args.updates} timed updates per scheme",
        flush=True,
    )
    print(
        "| scheme | target tokens/s | updates/s | peak memory (MB) | held-out loss before → after "
        "| epoch of 232,825 pairs (min) | 20-epoch recipe (h) |\n| --- | ---: | ---: | ---: | --- | ---: | ---: |",
        flush=True,
    )
    failures: list[str] = []
    for scheme in args.schemes:
        r, failed = check_scheme(scheme, args.updates, device, args.train_pairs, args.overrides)
        failures += failed
        print(
            f"| {scheme} | {r['tokens_per_s']:,.0f} | {r['updates_per_s']:.2f} | {r['peak_mb']:,.0f} | "
            f"{r['loss_before']:.3f} → {r['loss_after']:.3f} | {r['epoch_min']:,.1f} | {r['recipe_h']:,.1f} |",
            flush=True,
        )
    for line in failures:
        print(f"check failed: {line}", file=sys.stderr)
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    run_main(main)
