"""The step with no host in the loop (train.static_shapes, train.fused_optimizer, train.cuda_graphs),
checked on the CPU: padded batches change no loss or gradient, the captured update's arithmetic
follows the usual trainer, every scheme traces without graph breaks, the rotation's two forms
agree, and the config refuses what a capture cannot do. (The capture itself needs a GPU:
gpu/session.sh.)"""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
import torch._dynamo
from ignite.engine import Events

from data.batching import Collator
from experiment.config import load_config
from models.positional import SCHEMES, flex_form
from models.transformer import Transformer
from nmt import train as train_command
from tests.training.test_training_arithmetic import BOS, EOS, PAD, VOCAB, random_pairs
from training.engine import NonFiniteGuard, build_optimizer, create_trainer, train_loss
from training.graphs import CapturedUpdate
from training.schedules import lr_lambda
from utils.errors import ConfigError

CPU = torch.device("cpu")


def model_of(scheme: str, seed: int = 0, *extra: str):
    cfg = load_config(None, [f"model.positional.name={scheme}", "model.d_model=16", "model.n_heads=2",
                             "model.d_ff=32", "model.n_encoder_layers=1", "model.n_decoder_layers=1",
                             "model.dropout=0.0", "model.attention_dropout=0.0", "train.label_smoothing=0.1",
                             *extra])
    torch.manual_seed(seed)
    return cfg, Transformer(cfg.model, VOCAB, VOCAB, pad_id=PAD, joint_vocab=True)


def items(pairs):
    return [(i, np.array(s), np.array(t)) for i, (s, t) in enumerate(pairs)]


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_a_static_padded_batch_gives_the_loss_and_gradients_of_the_unpadded_one(scheme):
    """The padding rows and columns of a static-shape batch add nothing: the fixed-shape loss over
    every position of the padded batch equals the usual loss of the same pairs padded to their
    longest, and so do the gradients (in evaluation mode: no per-pass random positions)."""
    pairs = random_pairs(5, seed=1, max_len=9)
    plain = Collator(PAD, BOS, EOS)(items(pairs))
    padded = Collator(PAD, BOS, EOS, static_tokens=200)(items(pairs))
    assert padded.src.shape[0] > plain.src.shape[0] and padded.src.shape[1] > plain.src.shape[1]
    _, model = model_of(scheme)
    model.eval()
    grads = []
    for batch, fixed in ((plain, False), (padded, True)):
        model.zero_grad(set_to_none=True)
        loss, n = train_loss(model, batch, PAD, 0.1, None, fixed_shapes=fixed)
        loss.backward()
        grads.append((loss.item(), n, {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}))
    (loss_a, n_a, g_a), (loss_b, n_b, g_b) = grads
    assert n_a == n_b == sum(len(t) + 1 for _, t in pairs)
    assert loss_b == pytest.approx(loss_a, rel=1e-5)
    assert g_a.keys() == g_b.keys()
    for k in g_a:
        torch.testing.assert_close(g_b[k], g_a[k], rtol=1e-4, atol=1e-6, msg=k)


def test_the_captured_updates_arithmetic_follows_the_usual_trainer():
    """On the same static batches, the trainer (fused loss over the real tokens, foreach Adam) and
    the update a CUDA graph replays (loss over every position, fused Adam, the learning rate a
    tensor filled by the scheduler, run eagerly here) give the same loss curve and weights within
    rounding."""
    collate = Collator(PAD, BOS, EOS, static_tokens=120)
    batches = [collate(items(random_pairs(4, seed=s, max_len=10))) for s in range(6)]
    cfg, model = model_of("rope", 0, "train.lr=2e-3", "train.schedule=linear", "train.warmup_steps=2",
                          "train.max_steps=6")
    twin, start = copy.deepcopy(model), copy.deepcopy(model.state_dict())

    optimizer = build_optimizer(model.parameters(), cfg.train, CPU)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, len(batches)))
    trainer = create_trainer(model, optimizer, scheduler, torch.amp.GradScaler("cpu", enabled=False), cfg.train,
                             PAD, CPU, NonFiniteGuard())
    usual = []
    trainer.add_event_handler(Events.ITERATION_COMPLETED, lambda e: usual.append(e.state.output["loss"].item()))
    trainer.run(batches, max_epochs=1)

    on = load_config(None, ["train.fused_optimizer=true", "train.lr=2e-3"]).train
    fused = torch.optim.Adam(twin.parameters(), lr=torch.tensor(on.lr), betas=tuple(on.betas), eps=on.eps,
                             fused=True)
    twin_schedule = torch.optim.lr_scheduler.LambdaLR(fused, lr_lambda(cfg, len(batches)))
    guard = NonFiniteGuard()
    update = CapturedUpdate(lambda b: train_loss(twin, b, PAD, 0.1, None, fixed_shapes=True)[0], fused,
                            list(twin.parameters()), 0.0, CPU, guard)
    captured = []
    twin.train()
    for number, batch in enumerate(batches, 1):
        loss, norm = update(batch, number)
        twin_schedule.step()
        captured.append(loss.item())
        assert torch.isfinite(norm)
    assert captured == pytest.approx(usual, rel=1e-5)
    assert max((model.state_dict()[k] - v).abs().max().item() for k, v in start.items()) > 1e-3  # it trained
    # (weights are not compared one by one: Adam turns the rounding noise of a gradient that is zero
    # in exact arithmetic — the key projection's bias — into steps of the learning rate's size)
    guard.check()


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_every_scheme_traces_without_graph_breaks(scheme):
    """What torch.compile sees of a training forward pass and its fixed-shape loss is one graph
    (dynamo's tracer only; inductor's code generation would take minutes here)."""
    _, model = model_of(scheme, 0, "model.dropout=0.1")
    model.train()
    batch = Collator(PAD, BOS, EOS, static_tokens=64)(items(random_pairs(3, seed=2, max_len=6)))
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda b: train_loss(model, b, PAD, 0.1, None, fixed_shapes=True)[0])(batch)
    assert explained.graph_break_count == 0, [str(r.reason)[:200] for r in explained.break_reasons]
    assert explained.graph_count == 1


@pytest.mark.parametrize(("overrides", "field"), [
    (["train.cuda_graphs=true"], "cuda_graphs"),
    (["train.cuda_graphs=true", "train.static_shapes=true", "train.accumulate=2"], "cuda_graphs"),
    (["train.cuda_graphs=true", "train.static_shapes=true", "train.amp=fp16"], "cuda_graphs"),
    (["train.static_shapes=true", "train.batch_size=16"], "static_shapes"),
])
def test_the_config_refuses_what_a_captured_update_cannot_do(overrides, field):
    with pytest.raises(ConfigError, match=rf"^config key 'train.{field}' in the command line must be false "):
        load_config(None, overrides)


def test_the_guard_notes_in_place_and_reads_the_update_number_from_a_tensor():
    guard = NonFiniteGuard()
    guard.start(CPU)
    first_bad, value = guard.first_bad, guard.value
    number = torch.tensor(0)
    for n, loss in enumerate([1.0, float("nan"), float("inf")], 1):
        number.fill_(n)
        guard.note(torch.tensor(loss), number)
    assert guard.first_bad is first_bad and guard.value is value  # a captured graph keeps writing these
    assert int(first_bad) == 2 and torch.isnan(value)


def test_a_run_records_the_step_options_as_they_took_effect(tiny_config, tmp_path):
    """On a CPU, static shapes and the fused optimizer train; CUDA graphs do nothing, and the
    manifest says so."""
    run_dir = tmp_path / "run"
    train_command.main(["--config", str(tiny_config), "--run-dir", str(run_dir), "train.static_shapes=true",
                        "train.fused_optimizer=true", "train.cuda_graphs=true", "train.max_steps=4",
                        "train.eval_every=4"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["update"] == {"static_shapes": True, "fused_optimizer": True, "cuda_graphs": False}
    assert manifest["steps"] == 4
    losses = [json.loads(line)["loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
              if json.loads(line)["kind"] == "train"]
    assert len(losses) == 4 and all(np.isfinite(losses))


def test_an_optimizer_with_a_tensor_learning_rate_resumes_from_a_checkpoint(tmp_path):
    """What a run with CUDA graphs checkpoints: Adam whose learning rate is a tensor the scheduler
    fills in place. Saved, loaded with weights_only=True and stepped on, it continues exactly as the
    uninterrupted optimizer (the schedule's multiplier and the moments included)."""
    def make():
        params = [torch.nn.Parameter(torch.linspace(-1.0, 1.0, 5))]
        optimizer = torch.optim.Adam(params, lr=torch.tensor(0.5), fused=True)
        return params, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 0.1 * (k + 1))

    def step(params, optimizer, scheduler, g):
        params[0].grad = torch.tensor([1.0, -2.0, 0.5, 3.0, -1.0]) * g
        optimizer.step()
        scheduler.step()

    params, optimizer, scheduler = make()
    for g in (1.0, 0.5, -0.25):
        step(params, optimizer, scheduler, g)
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "weights": params[0].detach().clone()}, tmp_path / "last.pt")
    step(params, optimizer, scheduler, 2.0)

    saved = torch.load(tmp_path / "last.pt", weights_only=True)
    resumed, optimizer2, scheduler2 = make()
    optimizer2.load_state_dict(saved["optimizer"])
    scheduler2.load_state_dict(saved["scheduler"])
    with torch.no_grad():
        resumed[0].copy_(saved["weights"])
    assert float(optimizer2.param_groups[0]["lr"]) == pytest.approx(0.5 * 0.1 * 4)  # the 4th update's rate
    step(resumed, optimizer2, scheduler2, 2.0)
    torch.testing.assert_close(resumed[0].detach(), params[0].detach(), rtol=0, atol=1e-7)
    assert float(optimizer2.param_groups[0]["lr"]) == pytest.approx(float(optimizer.param_groups[0]["lr"]))


def test_flexattention_is_refused_for_training_on_a_cpu_and_with_attention_dropout(tiny_config, tmp_path, capsys):
    """FlexAttention has no backward on a CPU: training stops in one line before the run folder is
    made; and it has no dropout on the weights, so the config refuses the two together."""
    from utils.cli import run_main

    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        run_main(lambda: train_command.main(["--config", str(tiny_config), "--run-dir", str(run_dir),
                                             "model.attention_kernel=flex", "train.max_steps=2"]))
    assert stop.value.code != 0 and not run_dir.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.attention_kernel=flex trains on a GPU only" in err[0]
    with pytest.raises(ConfigError, match=r"'model.attention_dropout' .* must be 0 with model.attention_kernel=flex"):
        load_config(None, ["model.attention_kernel=flex", "model.attention_dropout=0.1"])
    assert load_config(None, ["model.attention_kernel=flex"]).model.attention_kernel == "flex"


@pytest.mark.parametrize("scheme", [n for n, s in SCHEMES.items() if flex_form(s).startswith("score_mod")])
def test_a_flexattention_forward_traces_without_graph_breaks(scheme):
    """Under model.attention_kernel=flex the schemes FlexAttention serves build their score_mod from
    tensors alone: dynamo sees a training forward and its fixed-shape loss as one graph (traced on
    the CPU without gradients, which FlexAttention has not there; its backward needs a GPU)."""
    _, model = model_of(scheme, 0, "model.dropout=0.1", "model.attention_kernel=flex")
    model.train()
    batch = Collator(PAD, BOS, EOS, static_tokens=64)(items(random_pairs(3, seed=2, max_len=6)))
    torch._dynamo.reset()
    with torch.no_grad():
        explained = torch._dynamo.explain(lambda b: train_loss(model, b, PAD, 0.1, None, fixed_shapes=True)[0])(batch)
    assert explained.graph_break_count == 0, [str(r.reason)[:200] for r in explained.break_reasons]
    assert explained.graph_count == 1
