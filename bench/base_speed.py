"""Transformer-base per scheme against ``torch.nn.Transformer`` of the same size, on a GPU, at
about 4k, 16k and 64k target tokens a batch (``make bench`` on CUDA; ``python -m nmt bench base-speed``).

The models: d_model 512, 8 heads, 6+6 layers, ffn 2048, dropout 0.1, a joint vocabulary of 16,000
(the IWSLT2017 recipe's); torch.nn.Transformer with the same embeddings, sinusoidal encodings and
tied output layer (``bench.train_speed.TorchTransformer``). The batches: pairs of 10–40 tokens a
side, ``tokens // 25`` of them (seeded), padded to the batch's longest — one batch per size, the
same for every model. Each model trains two ways on the same batch, and both ways of every model
are stepped round-robin (a step of each in turn, ``ROUNDS`` times; the median step counts), one
model at a time, the reference first and again last (its two figures' ratio is printed as the
drift of the device's speed):

- ``eager``: the update as PyTorch runs it (Adam, bf16 autocast, logits of every position);
- ``graphs``: the same update with the fused Adam captured as one CUDA graph
  (``training.graphs.CapturedUpdate``, what ``train.cuda_graphs`` trains with) — the reference
  gets exactly the same capture and the same fused, capturable Adam.

Peak memory, once per model: one eager update at ~16k tokens, measured alone (the activations'
peak above what was allocated before it, plus the weights, gradients and Adam's two moments).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from bench.common import PAD, device, synchronize
from bench.train_speed import TorchTransformer, make_batches
from data.batching import Batch
from experiment.config import load_config
from models.positional import SCHEMES
from models.transformer import Transformer
from training.engine import NonFiniteGuard, train_loss
from training.graphs import CapturedUpdate

VOCAB = 16_000
SIZES = (4_096, 16_384, 65_536)
ROUNDS = 10
REFERENCE = "torch_nn_transformer"


def base_model_config(scheme: str):
    """Transformer-base (d_model 512, 8 heads, 6+6 layers, ffn 2048, dropout 0.1)."""
    return load_config(None, ["model.d_model=512", "model.n_heads=8", "model.n_encoder_layers=6",
                              "model.n_decoder_layers=6", "model.d_ff=2048", "model.dropout=0.1",
                              f"model.positional.name={scheme}"]).model


def build(scheme: str, dev: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = base_model_config("sinusoidal" if scheme == REFERENCE else scheme)
    model = TorchTransformer(cfg, VOCAB) if scheme == REFERENCE else Transformer(cfg, VOCAB, VOCAB, PAD, True)
    return model.to(dev).train()


def loss_sum_of(model: torch.nn.Module):
    """The model's loss summed over real target tokens with fixed shapes, under bf16 autocast on
    CUDA: the trainer's ``train_loss`` for ours, ``F.cross_entropy`` of every position for the
    reference (the way its users write it)."""
    amp = torch.bfloat16 if next(model.parameters()).is_cuda else None

    def ours(b: Batch) -> torch.Tensor:
        return train_loss(model, b, PAD, 0.1, amp, fixed_shapes=True)[0]

    def reference(b: Batch) -> torch.Tensor:
        with torch.autocast(b.src.device.type, dtype=amp or torch.bfloat16, enabled=amp is not None):
            logits = model(b.src, b.tgt_in)
        return F.cross_entropy(logits.flatten(0, 1).float(), b.tgt_out.flatten(), ignore_index=PAD,
                               label_smoothing=0.1, reduction="sum")

    return ours if isinstance(model, Transformer) else reference


class Trainee:
    """One model trained one way: ``step(batch)`` -> seconds of one update (synchronised)."""

    def __init__(self, scheme: str, mode: str, dev: torch.device, pool=None):
        self.model = build(scheme, dev)
        params = list(self.model.parameters())
        graphs = mode == "graphs"
        self.optimizer = torch.optim.Adam(params, lr=torch.tensor(1e-4, device=dev) if graphs else 1e-4,
                                          betas=(0.9, 0.98), eps=1e-9, fused=graphs, capturable=graphs)
        self.loss_sum = loss_sum_of(self.model)
        self.update = CapturedUpdate(self.loss_sum, self.optimizer, params, 0.0, dev, NonFiniteGuard(), pool) \
            if graphs else None
        self.steps = 0

    def step(self, batch: Batch) -> float:
        synchronize()
        start = time.perf_counter()
        self.steps += 1
        if self.update is not None:
            self.update(batch, self.steps)
        else:
            loss = self.loss_sum(batch) / batch.ntokens
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        synchronize()
        return time.perf_counter() - start


def batch_of(tokens: int, dev: torch.device, seed: int = 0) -> Batch:
    src, tgt_in, tgt_out = make_batches(seed, n=1, sentences=max(1, tokens // 25), min_len=10, max_len=40,
                                        vocab=VOCAB)[0]
    return Batch(src.to(dev), tgt_in.to(dev), tgt_out.to(dev), torch.arange(src.size(0)),
                 int(tgt_out.ne(PAD).sum()))


def measure(schemes: list[str], sizes=SIZES, rounds: int = ROUNDS, modes=("eager", "graphs")) -> dict[str, float]:
    """{"base.<size>.<scheme>.<mode>.tokens_per_s" / ".step_ms": figure}, the batches' real target
    tokens as "base.<size>.tokens", and "base.<size>.drift": the reference's speed measured last
    over the same measured first (1.0: the device's speed did not move during the size).

    Per size, one model at a time (a graph's memory pool for 64k tokens is tens of GB: the models
    cannot all hold theirs at once), its modes stepped round-robin on the same batch; the
    reference first and again last."""
    dev = device()
    out: dict[str, float] = {}
    for size in sizes:
        batch = batch_of(size, dev)
        out[f"base.{size}.tokens"] = batch.ntokens
        reference_speed = []
        for name in [REFERENCE, *schemes, REFERENCE]:
            trainees = {m: Trainee(name, m, dev) for m in modes}
            for trainee in trainees.values():  # warm-up; with graphs: the eager first update, then the capture
                for _ in range(3):
                    trainee.step(batch)
            times: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(rounds):
                for m, trainee in trainees.items():
                    times[m].append(trainee.step(batch))
            for m, t in times.items():
                median = statistics.median(t)
                if name == REFERENCE and m == modes[0]:
                    reference_speed.append(batch.ntokens / median)
                if name == REFERENCE and f"base.{size}.{name}.{m}.step_ms" in out:
                    continue  # the reference's second measurement only checks the drift
                out[f"base.{size}.{name}.{m}.step_ms"] = 1000 * median
                out[f"base.{size}.{name}.{m}.tokens_per_s"] = batch.ntokens / median
            del trainees, trainee
            if dev.type == "cuda":
                torch.cuda.empty_cache()
        out[f"base.{size}.drift"] = reference_speed[-1] / reference_speed[0]
    return out


def peak_memory_mb(scheme: str, tokens: int = SIZES[1]) -> float:
    """Peak memory (MB) of one eager update at ~``tokens``: weights, gradients, Adam's moments and
    the activations' peak."""
    dev = device()
    trainee = Trainee(scheme, "eager", dev)
    batch = batch_of(tokens, dev)
    trainee.step(batch)  # Adam's state exists from here on
    state = sum(p.numel() * p.element_size() * 4 for p in trainee.model.parameters())  # weights, grads, 2 moments
    if dev.type != "cuda":
        return state / 2 ** 20
    synchronize()
    before = torch.cuda.memory_allocated(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    trainee.step(batch)
    peak = torch.cuda.max_memory_allocated(dev) - before
    del trainee
    torch.cuda.empty_cache()
    return (state + peak) / 2 ** 20


def table(r: dict[str, float], schemes: list[str], sizes=SIZES) -> str:
    """Markdown: per size and scheme, tokens/s eager and with graphs, and the ratios to the
    reference in the same mode."""
    lines = ["| target tokens (batch) | model | eager tokens/s | × nn eager | graphs tokens/s | × nn graphs "
             "| graphs / eager |", "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for size in sizes:
        ref_e, ref_g = (r[f"base.{size}.{REFERENCE}.{m}.tokens_per_s"] for m in ("eager", "graphs"))
        for n in [REFERENCE, *schemes]:
            e, g = (r[f"base.{size}.{n}.{m}.tokens_per_s"] for m in ("eager", "graphs"))
            lines.append(f"| {int(r[f'base.{size}.tokens']):,} | {n} | {e:,.0f} | {e / ref_e:.2f} | {g:,.0f} "
                         f"| {g / ref_g:.2f} | {g / e:.2f} |")
    drift = ", ".join(f"{int(r[f'base.{size}.tokens']):,} tokens {r[f'base.{size}.drift']:.3f}" for size in sizes)
    return "\n".join(lines) + f"\n\nthe reference's eager speed measured last over first: {drift}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nmt bench base-speed", description=__doc__.splitlines()[0])
    parser.add_argument("--schemes", nargs="+", choices=SCHEMES, default=list(SCHEMES), metavar="SCHEME",
                        help="schemes measured beside torch.nn.Transformer (default: every registered one)")
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES),
                        help="target tokens a batch (default: 4096 16384 65536)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"timed steps per model and mode (default {ROUNDS})")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if device().type != "cuda":
        print("note: no CUDA device: the graphs mode needs one; measuring eager only", flush=True)
    modes = ("eager", "graphs") if device().type == "cuda" else ("eager",)
    r = measure(args.schemes, args.sizes, args.rounds, modes)
    if "graphs" not in modes:
        for key in [k for k in r if k.endswith(".eager.tokens_per_s")]:
            r[key.replace(".eager.", ".graphs.")] = r[key]  # the table's columns, unmeasured: equal to eager
    print(table(r, args.schemes, args.sizes), flush=True)
    for n in [REFERENCE, *args.schemes]:
        print(f"peak memory {n}: {peak_memory_mb(n):,.0f} MB", flush=True)
    return 0
