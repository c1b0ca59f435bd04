"""The model and the training step on the ``meta`` device: tensors with shapes and no data.

Anything that reads a value back on the host (``.item()``, ``int(t)``, ``bool(t)``, ``nonzero``
without a size) fails there, and so does a positional table or mask created on the CPU beside
meta inputs. So these tests show that every scheme builds its positions and masks on the model's
device and that a training update never waits for the device — what lets a GPU run ahead of
the Python loop.
"""
from __future__ import annotations

import math

import pytest
import torch

from data.batching import Batch
from experiment.config import load_config
from models.positional import SCHEMES
from models.transformer import Transformer
from training.engine import NonFiniteGuard, NonFiniteLoss, create_trainer, train_loss

VOCAB, PAD = 40, 0
META = torch.device("meta")


def config(scheme: str):
    return load_config(None, ["model.d_model=32", "model.n_heads=4", "model.n_encoder_layers=2",
                              "model.n_decoder_layers=2", "model.d_ff=64", f"model.positional.name={scheme}"])


def meta_batch() -> Batch:
    src = torch.empty(2, 7, dtype=torch.long, device=META)
    tgt = torch.empty(2, 5, dtype=torch.long, device=META)
    return Batch(src, tgt, tgt, torch.empty(2, dtype=torch.long, device=META), ntokens=9)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_trains_and_decodes_on_the_meta_device(scheme):
    model = Transformer(config(scheme).model, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).to(META).train()
    batch = meta_batch()
    loss, ntokens = train_loss(model, batch, PAD, 0.1, None)
    loss.backward()
    assert loss.device == META and ntokens == 9
    assert all(p.grad is not None and p.grad.device == META for p in model.parameters() if p.requires_grad)
    model.eval()
    with torch.no_grad():
        cache = model.start_decoding(model.encode(batch.src))
        step = model.decode(batch.tgt_in[:, :1], cache)  # first step, then one more from the cache
        step = model.decode(batch.tgt_in[:, 1:2], step.cache)
        whole = model(batch.src, batch.tgt_in)
    assert step.logits.shape == (2, 1, VOCAB) and step.logits.device == META
    assert whole.shape == (2, 5, VOCAB) and whole.device == META


def test_the_training_step_reads_nothing_back_from_the_device():
    """The ignite trainer's whole update (forward, fused loss, backward, clipping, Adam, the
    schedule) on meta tensors: loss and gradient norm come out as device tensors."""
    cfg = config("rope")
    model = Transformer(cfg.model, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).to(META)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    trainer = create_trainer(model, optimizer, scheduler, scaler, cfg.train, PAD, META, NonFiniteGuard())
    trainer.run([meta_batch()] * 3, max_epochs=1)
    out = trainer.state.output
    assert trainer.state.iteration == 3
    assert out["loss"].device == META and out["grad_norm"].device == META and out["ntokens"] == 9


def test_the_guard_names_the_first_non_finite_update_only_when_checked():
    guard = NonFiniteGuard()
    guard.check()  # nothing noted yet
    for update, value in enumerate([2.5, 2.4, math.nan, 2.3, math.inf], start=1):
        guard.note(torch.tensor(value), update)
        if update == 2:
            guard.check()  # every loss finite so far: no error
    with pytest.raises(NonFiniteLoss, match=r"became nan at update 3"):
        guard.check()


def test_floating_buffers_and_parameters_follow_the_model_dtype():
    for scheme in SCHEMES:
        model = Transformer(config(scheme).model, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True).double()
        tensors = list(model.named_parameters()) + list(model.named_buffers())
        wrong = [name for name, t in tensors if t.is_floating_point() and t.dtype != torch.float64]
        assert not wrong, (scheme, wrong)
