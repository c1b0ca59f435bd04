"""The numbers training computes, against hand computations written here: an accumulated update
equals one batch k times as large, a two-process update equals the one-process update of the same
global batch, the validation metrics that choose best.pt are token-weighted means, and the
sampler's shards cover the batches once."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from data.batching import Batch, TokenBatchSampler, pad_sequences
from experiment.checkpoint import load_checkpoint
from experiment.config import load_config
from models.transformer import Transformer
from tests.conftest import ROOT, TINY_8
from training.engine import NonFiniteGuard, create_evaluator, create_trainer

PAD, BOS, EOS, VOCAB = 0, 2, 3, 30


def batch_of(pairs: list[tuple[list[int], list[int]]]) -> Batch:
    """A padded batch as the collator makes it, from (source ids, target ids) pairs."""
    srcs, tgts = [s for s, _ in pairs], [t for _, t in pairs]
    return Batch(pad_sequences(srcs, PAD, suffix=EOS), pad_sequences(tgts, PAD, prefix=BOS),
                 pad_sequences(tgts, PAD, suffix=EOS), torch.arange(len(pairs)), sum(len(t) + 1 for t in tgts))


def random_pairs(n: int, seed: int, max_len: int) -> list[tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    return [(rng.integers(4, VOCAB, rng.integers(2, max_len)).tolist(),
             rng.integers(4, VOCAB, rng.integers(2, max_len)).tolist()) for _ in range(n)]


def tiny_model(seed: int = 0, *extra: str):
    cfg = load_config(None, ["model.d_model=16", "model.n_heads=2", "model.d_ff=32", "model.n_encoder_layers=1",
                             "model.n_decoder_layers=1", "model.dropout=0.0", "train.clip_norm=0",
                             "train.label_smoothing=0.1", *extra])
    torch.manual_seed(seed)
    return cfg, Transformer(cfg.model, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True)


def sgd_update(batches: list[Batch], accumulate: int) -> dict[str, torch.Tensor]:
    """The weights after the trainer runs ``batches`` with plain SGD at lr 1 (the update is minus the
    gradient, so any weighting of the tokens shows in it)."""
    cfg, model = tiny_model(0, f"train.accumulate={accumulate}", "train.max_tokens=50")
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    trainer = create_trainer(model, optimizer, scheduler, scaler, cfg.train, PAD, torch.device("cpu"),
                             NonFiniteGuard())
    trainer.run(batches, max_epochs=1)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_an_accumulated_update_equals_one_batch_k_times_as_large():
    """Three batches of very different token counts accumulated into one update, against the same
    sentences as one batch: the gradient is the loss summed over all their tokens over their number."""
    pairs = random_pairs(9, 0, 12)
    parts = [batch_of(pairs[:2]), batch_of(pairs[2:7]), batch_of(pairs[7:])]
    assert len({b.ntokens for b in parts}) == 3
    accumulated = sgd_update(parts, accumulate=3)
    whole = sgd_update([batch_of(pairs)], accumulate=1)
    _, start = tiny_model(0)
    moved = max((whole[k] - start.state_dict()[k]).abs().max().item() for k in whole)
    assert moved > 1e-3  # the update is not trivially zero
    for key in whole:
        torch.testing.assert_close(accumulated[key], whole[key], atol=1e-6, rtol=1e-5, msg=key)


def test_validation_metrics_are_token_weighted_means_of_the_formulas():
    """loss (label-smoothed), NLL, perplexity and accuracy over two batches of different sizes,
    against per-token arithmetic written here: loss_t = logsumexp(z) - (1 - e) z_y - e/V sum z,
    nll_t = logsumexp(z) - z_y, summed over real tokens of both batches and divided by their count."""
    cfg, model = tiny_model(1)
    batches = [batch_of(random_pairs(2, 3, 10)), batch_of(random_pairs(5, 4, 4))]
    evaluator = create_evaluator(model, cfg.train, PAD, torch.device("cpu"))
    evaluator.run(batches, max_epochs=1)
    got = evaluator.state.metrics["valid"]
    e = cfg.train.label_smoothing
    loss = nll = correct = tokens = 0.0
    model.eval()
    with torch.no_grad():
        for b in batches:
            logits = model(b.src, b.tgt_in).double()
            for row in range(b.tgt_out.size(0)):
                for t in range(b.tgt_out.size(1)):
                    y = int(b.tgt_out[row, t])
                    if y == PAD:
                        continue
                    z = logits[row, t]
                    lse = torch.logsumexp(z, 0).item()
                    loss += lse - (1 - e) * z[y].item() - e / VOCAB * z.sum().item()
                    nll += lse - z[y].item()
                    correct += int(z.argmax().item() == y)
                    tokens += 1
    assert tokens == sum(b.ntokens for b in batches)
    assert got["loss"] == pytest.approx(loss / tokens, rel=1e-5)
    assert got["nll"] == pytest.approx(nll / tokens, rel=1e-5)
    assert got["ppl"] == pytest.approx(math.exp(nll / tokens), rel=1e-5)
    assert got["accuracy"] == pytest.approx(correct / tokens, abs=1e-9)


@pytest.mark.parametrize("world", [2, 3])
def test_the_shards_of_the_ranks_cover_the_batches_once(world):
    """Each epoch the ranks get disjoint batches, the same number each (so that they stay in step),
    together every batch but the len % world left over; over epochs the leftovers change."""
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 40, 500), rng.integers(1, 40, 500)
    samplers = [TokenBatchSampler(src, tgt, max_tokens=300, seed=7, num_replicas=world, rank=r) for r in range(world)]
    every = [tuple(b) for b in TokenBatchSampler(src, tgt, max_tokens=300, seed=7).batches]
    assert len(every) % world > 0  # 65 batches: 1 (world 2) or 2 (world 3) left over each epoch
    seen_over_epochs = set()
    for epoch in range(6):
        shards = []
        for s in samplers:
            s.set_epoch(epoch)
            shards.append([tuple(b) for b in s])
        assert len({len(s) for s in shards}) == 1 and len(shards[0]) == len(every) // world
        flat = [b for s in shards for b in s]
        assert len(set(flat)) == len(flat)  # disjoint
        assert set(flat) <= set(every) and len(set(every) - set(flat)) == len(every) % world
        seen_over_epochs |= set(flat)
    assert seen_over_epochs == set(every)
    # and every sentence is in exactly one batch
    assert sorted(i for b in every for i in b) == list(range(500))


def test_a_two_process_update_equals_the_one_process_update_of_the_same_global_batch(tmp_path):
    """Two processes, one batch each per update, against one process accumulating the same two
    batches (the sampler gives rank r the batches r, r + 2, ...; one process with accumulate=2
    takes batches 0 and 1, then 2 and 3): after two updates the weights agree to rounding."""
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY_8.format(root=ROOT, cache=tmp_path / "cache"), encoding="utf-8")
    common = ["train.max_steps=2", "train.eval_every=2", "model.dropout=0.0", "train.clip_norm=0",
              "train.warmup_steps=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29533",
                          "train.py", "--config", str(config), "--run-dir", str(tmp_path / "ddp"), *common],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    one = subprocess.run([sys.executable, "train.py", "--config", str(config), "--run-dir", str(tmp_path / "one"),
                          "train.accumulate=2", *common], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    a = load_checkpoint(tmp_path / "ddp" / "checkpoints" / "last.pt")
    b = load_checkpoint(tmp_path / "one" / "checkpoints" / "last.pt")
    assert a["step"] == b["step"] == 2
    for key in a["model"]:
        torch.testing.assert_close(a["model"][key], b["model"][key], atol=2e-5, rtol=1e-4, msg=key)
