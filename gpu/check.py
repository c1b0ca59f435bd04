"""The first use on a device: Transformer-base per scheme, built and trained exactly as train.py does.

For each scheme, ``configs/iwslt2017/base.yaml`` with ``model.positional.name=<scheme>``
(Transformer-base: d_model 512, 8 heads, 6+6 layers, 16k joint vocabulary, the recipe's token
budget per batch and its epochs — both read from the config and printed in the header — and mixed
precision on CUDA), with the built-in synthetic corpus standing in for IWSLT2017 (232,825 training
pairs of 3-40 words, the size of IWSLT2017 fr-en's training split). The model, optimizer, compile
setting, scheduler and batching are the trainer's own (``training.loop.build_session``,
``data.pipeline.make_loader``), so overrides such as ``train.static_shapes=true
train.fused_optimizer=true train.cuda_graphs=true`` or ``train.compile=true`` take effect as in
train.py. A short linear warm-up to 5e-4 replaces the recipe's schedule so the loss visibly falls.

Timing: the first ``--batches`` batches of the epoch are run ``WARMUP_PASSES`` times untimed —
every batch shape that is timed has been seen twice before (with CUDA graphs: once eagerly, once
captured) — then ``--repeat`` timed passes over the same batches, each printed as its own row, so
that warm-up can never pass for speed: the rows of one scheme must agree. Updates are counted as
the trainer does them. Checks, per scheme: every loss finite; the teacher-forced loss of a fixed
held-out batch lower after the updates than before; cached == uncached greedy decoding and beam 1
== greedy on the device; each stack's distance profile (what the pictures draw) computed from the
model on the device, equal to a CPU copy's. Prints target tokens/s, updates/s, peak device memory reserved (CPU:
the process's peak resident memory), and what an epoch of 232,825 pairs and the recipe would take.

    python -m nmt gpu check [--schemes S ...] [--batches N] [--repeat R] [--device cuda] [key=value ...]
    (make gpu-check)

Exits 1 when a check fails (a line per failure), 0 otherwise.
"""
from __future__ import annotations

import argparse
import copy
import gc
import platform
import time

import ignite
import torch
from ignite.engine import Events

from bench.common import peak_rss_mb
from data.pipeline import make_loader, prepare_data
from experiment.config import Config, load_config
from models.positional import SCHEMES, distance_profile
from search.beam import beam_search
from search.greedy import greedy_search
from training.engine import autocast_dtype, train_loss
from training.loop import build_session, update_record
from utils.device import device_name, resolve_device
from utils.paths import ROOT

RECIPE = ROOT / "configs" / "iwslt2017" / "base.yaml"
IWSLT_TRAIN_PAIRS = 232_825
WARMUP_PASSES = 2


def check_config(scheme: str, updates: int, train_pairs: int, overrides: list[str] = ()) -> Config:
    """The recipe for ``scheme`` on synthetic data, with a linear schedule over ``updates``."""
    return load_config(RECIPE, [
        f"model.positional.name={scheme}", "data.source=synthetic", "data.test_splits=[test]",
        f"data.synthetic.train={{size: {train_pairs}, min_words: 3, max_words: 40}}",
        "data.synthetic.validation={size: 64, min_words: 3, max_words: 40}",
        "data.synthetic.test={size: 64, min_words: 3, max_words: 40}",
        "train.schedule=linear", "train.lr=5e-4", f"train.warmup_steps={max(1, updates // 2)}",
        f"train.max_steps={updates}", *overrides])


def held_out_loss(model, batch, cfg: Config, pad_id: int, device: torch.device) -> float:
    model.eval()
    with torch.no_grad():
        loss, ntokens = train_loss(model, batch.to(device), pad_id, cfg.train.label_smoothing,
                                   autocast_dtype(cfg.train, device))
    return loss.item() / max(ntokens, 1)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def decoding_failures(scheme: str, model, src: torch.Tensor, tok, device: torch.device) -> list[str]:
    """Cached == uncached greedy decoding and beam 1 == greedy on the device."""
    model.eval()
    banned = (tok.pad_id, tok.bos_id)
    failures = []
    with torch.no_grad():
        greedy = greedy_search(model, src, tok.bos_id, tok.eos_id, 1.0, 5, banned_ids=banned)
        if greedy != greedy_search(model, src, tok.bos_id, tok.eos_id, 1.0, 5, use_cache=False, banned_ids=banned):
            failures.append(f"{scheme}: cached and uncached greedy decoding differ on {device}")
        beam1 = beam_search(model, src, tok.bos_id, tok.eos_id, beam=1, max_len_a=1.0, max_len_b=5, banned_ids=banned,
                            stopping="first_k")  # fairseq's rule: beam 1 is greedy
        if [h[0].tokens for h in beam1] != greedy:
            failures.append(f"{scheme}: beam 1 differs from greedy on {device}")
    return failures


def profile_failures(scheme: str, model, device: torch.device) -> list[str]:
    """Each stack's distance profile (the pictures' and the explorer page's) is drawn from the model
    on the device, and equals the one drawn from a CPU copy of it."""
    failures = []
    for name in ("encoder_pe", "decoder_pe"):
        pe = getattr(model, name)
        try:
            on_device, on_cpu = distance_profile(pe, 16), distance_profile(copy.deepcopy(pe).cpu(), 16)
        except RuntimeError as err:
            failures.append(f"{scheme}: {name}.distance_profile fails on {device}: {str(err).splitlines()[0]}")
            continue
        if not torch.allclose(on_device.values.float(), on_cpu.values.float()):
            failures.append(f"{scheme}: {name}.distance_profile on {device} differs from the CPU's")
    return failures


def check_scheme(scheme: str, n_batches: int, repeat: int, device: torch.device, train_pairs: int,
                 overrides: list[str] = ()) -> tuple[dict, list[str]]:
    """(figures, failed checks) of one scheme; figures["passes"] holds one dict per timed pass."""
    passes = WARMUP_PASSES + repeat
    if device.type == "cuda":  # the cache an earlier scheme left reserved would count as this one's peak
        gc.collect()
        torch.cuda.empty_cache()
    cfg = check_config(scheme, n_batches * passes, train_pairs, overrides)
    data = prepare_data(cfg.data, cfg.tokenizer, cfg.seed)
    tok = data.tokenizer
    pin = device.type == "cuda"
    loader = make_loader(data.encoded[cfg.data.train_split], tok, cfg.train, shuffle=True, seed=cfg.seed,
                         pin_memory=pin)
    batches = [b for b, _ in zip(loader, range(n_batches))]
    held_out = next(iter(make_loader(data.encoded[cfg.data.valid_split], tok, cfg.train, shuffle=False,
                                     seed=cfg.seed)))
    torch.manual_seed(cfg.seed)
    session = build_session(cfg, tok, device, 1, len(loader))
    trainer = session.trainer
    marks: list[tuple[int, float]] = []  # (iteration, time) at the end of each pass

    @trainer.on(Events.ITERATION_COMPLETED(every=len(batches)))
    def end_of_pass(engine) -> None:
        synchronize(device)
        marks.append((engine.state.iteration, time.perf_counter()))
        if len(marks) == WARMUP_PASSES and device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    before = held_out_loss(session.raw_model, held_out, cfg, tok.pad_id, device)
    trainer.run(batches * passes, max_epochs=1)
    session.state.guard.check()  # a non-finite loss stops the check with its own message
    after = held_out_loss(session.raw_model, held_out, cfg, tok.pad_id, device)
    failures = [] if after < before else [f"{scheme}: held-out loss did not fall ({before:.3f} -> {after:.3f})"]
    failures += decoding_failures(scheme, session.raw_model, held_out.src[:16].to(device), tok, device)
    failures += profile_failures(scheme, session.raw_model, device)
    pass_tokens = sum(b.ntokens for b in batches)
    epoch_tokens = float(data.encoded[cfg.data.train_split].tgt_lengths.sum()) * IWSLT_TRAIN_PAIRS / train_pairs
    rows = []
    for (start_it, start), (end_it, end) in zip(marks[WARMUP_PASSES - 1:], marks[WARMUP_PASSES:]):
        seconds = end - start
        rate = pass_tokens / seconds
        rows.append({"tokens_per_s": rate, "updates": end_it - start_it, "updates_per_s": (end_it - start_it) / seconds,
                     "epoch_min": epoch_tokens / rate / 60, "recipe_h": cfg.train.max_epochs * epoch_tokens / rate / 3600})
    # reserved, not allocated: a graph's replay takes its memory from the graph's pool, which the
    # allocator counts as reserved only
    peak = torch.cuda.max_memory_reserved(device) / 2 ** 20 if device.type == "cuda" else peak_rss_mb()
    shapes = len({(tuple(b.src.shape), tuple(b.tgt_in.shape)) for b in batches})
    return {"passes": rows, "peak_mb": peak, "loss_before": before, "loss_after": after, "shapes": shapes,
            "update": update_record(cfg, device, getattr(trainer, "captured", None))}, failures


def versions(device: torch.device) -> str:
    """The software (and device) the figures were measured with."""
    parts = [f"python {platform.python_version()}", f"torch {torch.__version__}", f"ignite {ignite.__version__}"]
    if device.type == "cuda":
        parts += [f"CUDA {torch.version.cuda}", f"cuDNN {torch.backends.cudnn.version()}"]
    return ", ".join(parts)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt gpu check", description=__doc__.splitlines()[0])
    parser.add_argument("--schemes", nargs="+", choices=SCHEMES, default=list(SCHEMES), metavar="SCHEME",
                        help="schemes to check (default: every registered one)")
    parser.add_argument("--batches", type=int, default=30,
                        help=f"batches timed per pass (default 30; run {WARMUP_PASSES} times untimed first)")
    parser.add_argument("--repeat", type=int, default=2, help="timed passes per scheme, each its own row (default 2)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="cuda, cuda:1, ... (default: cuda where there is one, else cpu)")
    parser.add_argument("--train-pairs", type=int, default=IWSLT_TRAIN_PAIRS,
                        help="synthetic training pairs (default: IWSLT2017's count; the epoch time is scaled to it)")
    parser.add_argument("overrides", nargs="*", help="config overrides (key=value) for every scheme")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_intermixed_args(argv)
    if args.batches < 1 or args.repeat < 1:
        raise SystemExit("error: --batches and --repeat must be at least 1")
    device = resolve_device(args.device)
    recipe = check_config("none", 1, 64, args.overrides).train
    print(f"device: {device_name(device)}; {versions(device)}", flush=True)
    print(f"Transformer-base, the recipe's {recipe.max_tokens:,}-token batches"
          f"{' with ' + ' '.join(args.overrides) if args.overrides else ''}; {args.batches} batches a pass, "
          f"{WARMUP_PASSES} untimed passes, then {args.repeat} timed", flush=True)
    print(f"| scheme | pass | target tokens/s | updates | updates/s | batch shapes | peak memory reserved (MB) "
          f"| held-out loss before → after | epoch of 232,825 pairs (min) | {recipe.max_epochs}-epoch recipe (h) |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |", flush=True)
    failures: list[str] = []
    notes: list[str] = []
    for scheme in args.schemes:
        r, failed = check_scheme(scheme, args.batches, args.repeat, device, args.train_pairs, args.overrides)
        failures += failed
        for i, p in enumerate(r["passes"], 1):
            print(f"| {scheme} | {i} | {p['tokens_per_s']:,.0f} | {p['updates']} | {p['updates_per_s']:.2f} | "
                  f"{r['shapes']} | {r['peak_mb']:,.0f} | {r['loss_before']:.3f} → {r['loss_after']:.3f} | "
                  f"{p['epoch_min']:,.1f} | {p['recipe_h']:,.1f} |", flush=True)
        for line in failed:  # at once: a session cut short still shows what failed before it
            print(f"check failed: {line}", flush=True)
        if r["update"].get("capture_failure"):
            notes.append(f"{scheme}: CUDA graphs not used ({r['update']['capture_failure']})")
    for line in notes:
        print(f"note: {line}", flush=True)
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed", flush=True)
    return 1 if failures else 0
