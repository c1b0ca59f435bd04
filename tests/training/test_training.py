"""train.py end to end on tiny synthetic runs: outputs, exact resume, averaging, failures, DDP."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from experiment.checkpoint import load_checkpoint, step_checkpoints
from nmt import train
from tests.conftest import ROOT
from utils.errors import UserError


def run(args: list[str]) -> None:
    train.main([str(a) for a in args])


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run_dir / "checkpoints" / "last.pt")["model"]


def records(run_dir: Path, kind: str) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_training_writes_a_complete_run_directory(tiny_config, tmp_path):
    run_dir = tmp_path / "run"
    started = time.monotonic()
    run(["--config", tiny_config, "--run-dir", run_dir])
    for name in ("config.yaml", "manifest.json", "metrics.jsonl", "tokenizer", "logs",
                 "checkpoints/last.pt", "checkpoints/best.pt"):
        assert (run_dir / name).exists(), name
    assert list((run_dir / "logs").iterdir())
    assert len(step_checkpoints(run_dir / "checkpoints")) == 2  # keep_last
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for key in ("packages", "device", "config_hash", "data_fingerprint", "seed", "started", "last_finished"):
        assert key in manifest, key
    assert manifest["seed"] == 3 and manifest["steps"] == 8
    assert manifest["precision"] == "fp32"  # amp: auto on a CPU; bf16 on a GPU (tables refuse to mix them)
    # the machine it ran on: results differ in the last bits between CPU kinds and kernel sets
    # ... and its threads, as --threads auto chose them and said why (the command gives the process back its
    # own threads when it returns, so torch's count here says nothing of the run's)
    assert manifest["cpu"] and 1 <= manifest["threads"] <= len(os.sched_getaffinity(0))
    said = f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} set" if os.environ.get("OMP_NUM_THREADS") else \
        f"auto, {manifest['threads']} thread(s): "
    assert manifest["thread_choice"].startswith(said)
    assert manifest["cpu_kernels"] == os.environ.get("ATEN_CPU_CAPABILITY", manifest["cpu_kernels"]).upper()
    assert manifest["cpu_kernels"] in {"DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256", "SVE"}
    assert 0 < manifest["train_seconds"] < time.monotonic() - started
    # the longest training pair in tokens, as the run's own tokenizer encodes the training split (no eos)
    from data.corpus import load_corpus
    from experiment.config import load_config
    from tokenizer import load_tokenizer

    cfg = load_config(run_dir / "config.yaml")
    train = load_corpus(cfg.data, [cfg.data.train_split])[cfg.data.train_split]
    tok = load_tokenizer(run_dir / "tokenizer")
    kept = [(s, t) for s, t in zip(tok.encode_src(train.src), tok.encode_tgt(train.tgt))
            if len(s) <= cfg.data.max_len and len(t) <= cfg.data.max_len]
    assert manifest["longest_training_tokens"] == {"source": max(len(s) for s, _ in kept),
                                                   "target": max(len(t) for _, t in kept)}
    train_points, valid_points = records(run_dir, "train"), records(run_dir, "valid")
    assert [p["step"] for p in train_points] == list(range(1, 9))
    assert [p["step"] for p in valid_points] == [4, 8]
    assert all(torch.isfinite(torch.tensor(p["loss"])) for p in train_points)
    for key in ("loss", "ppl", "accuracy", "bleu", "bleu_signature"):
        assert key in valid_points[0]
    assert "nrefs:1" in valid_points[0]["bleu_signature"]
    ckpt = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert ckpt["step"] == 8 and {"optimizer", "scheduler", "rng", "trainer"} <= set(ckpt)


def test_a_budget_between_validations_still_validates_the_final_weights(tiny_config, tmp_path):
    run_dir = tmp_path / "run"
    run(["--config", tiny_config, "--run-dir", run_dir, "train.max_steps=6"])  # eval_every 4
    valid_points = records(run_dir, "valid")
    assert [p["step"] for p in valid_points] == [4, 6]
    last_best = [p["step"] for p in valid_points if p["best"]][-1]
    assert load_checkpoint(run_dir / "checkpoints" / "best.pt")["step"] == last_best
    assert [p.name for p in step_checkpoints(run_dir / "checkpoints")][-1] == "step_00000006.pt"


def test_existing_run_directory_is_refused_unless_overwrite(tiny_config, tmp_path):
    run_dir = tmp_path / "run"
    run(["--config", tiny_config, "--run-dir", run_dir, "train.max_steps=1"])
    with pytest.raises(UserError, match="--overwrite"):
        run(["--config", tiny_config, "--run-dir", run_dir])
    run(["--config", tiny_config, "--run-dir", run_dir, "--overwrite", "train.max_steps=2"])
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == 2


@pytest.mark.parametrize("scheme", [[], ["model.positional.name=cape"], ["model.positional.name=randomized"]],
                         ids=["config", "cape", "randomized"])
def test_exact_resume_matches_an_uninterrupted_run(tiny_config, tmp_path, scheme):
    # 5 steps is mid-epoch (the training split gives more batches than that), dropout is on;
    # cape and randomized draw their training positions from the RNG the checkpoint restores
    whole, split = tmp_path / "whole", tmp_path / "split"
    run(["--config", tiny_config, "--run-dir", whole, "train.max_steps=10", "train.eval_every=3", *scheme])
    run(["--config", tiny_config, "--run-dir", split, "train.max_steps=5", "train.eval_every=3", *scheme])
    first_session = json.loads((split / "manifest.json").read_text())["train_seconds"]
    run(["--resume", split, "train.max_steps=10"])
    assert json.loads((split / "manifest.json").read_text())["train_seconds"] > first_session  # both sessions
    a, b = weights(whole), weights(split)
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6
    whole_curve, split_curve = records(whole, "train"), records(split, "train")
    assert [p["step"] for p in split_curve] == [p["step"] for p in whole_curve] == list(range(1, 11))
    assert [p["loss"] for p in split_curve] == pytest.approx([p["loss"] for p in whole_curve], abs=1e-6)


def test_a_killed_sessions_training_time_is_counted_up_to_its_last_checkpoint(tiny_config, tmp_path):
    """A session ended by SIGKILL (a machine's stop, the OOM killer) runs no handler and never
    writes its time to the manifest. Before, a resumed run then recorded its later sessions only
    and the archive's cost undercounted; the checkpoint the killed session left carries its total."""
    run_dir = tmp_path / "run"
    run(["--config", tiny_config, "--run-dir", run_dir, "train.max_steps=5", "train.eval_every=3"])
    manifest_path, last = run_dir / "manifest.json", run_dir / "checkpoints" / "last.pt"
    first = json.loads(manifest_path.read_text())["train_seconds"]
    ckpt = load_checkpoint(last)
    assert 0 < ckpt["train_seconds"] <= first + 0.05  # the running total when it was saved (manifest: 0.1 s)
    # what a killed session leaves: a checkpoint after 1,000 s of training, and the manifest as its
    # start wrote it (the time of the sessions before it: none)
    ckpt["train_seconds"] = 1000.0
    torch.save(ckpt, last)
    manifest = json.loads(manifest_path.read_text())
    manifest["train_seconds"] = 0.0
    manifest_path.write_text(json.dumps(manifest))
    started = time.monotonic()
    run(["--resume", run_dir, "train.max_steps=10"])
    total = json.loads(manifest_path.read_text())["train_seconds"]
    assert 1000.0 < total < 1000.0 + (time.monotonic() - started) + 0.05


def test_same_seed_gives_the_same_loss_curve(tiny_config, tmp_path):
    for name in ("a", "b"):
        run(["--config", tiny_config, "--run-dir", tmp_path / name, "train.max_steps=4",
             "train.deterministic=true", "train.eval_every=0"])

    def curve(d: Path) -> list[float]:
        return [p["loss"] for p in records(d, "train")]

    assert curve(tmp_path / "a") == curve(tmp_path / "b") and len(curve(tmp_path / "a")) == 4


def test_average_of_the_last_checkpoints(tiny_config, tmp_path):
    run_dir = tmp_path / "run"
    run(["--config", tiny_config, "--run-dir", run_dir, "train.eval_every=2", "train.keep_last=3"])
    run(["--average", run_dir, "--last", "2"])
    steps = step_checkpoints(run_dir / "checkpoints")[-2:]
    avg = load_checkpoint(run_dir / "checkpoints" / "avg.pt")["model"]
    first, second = (load_checkpoint(p)["model"] for p in steps)
    name = "encoder_layers.0.ff.fc1.weight"
    assert torch.allclose(avg[name], (first[name] + second[name]) / 2, atol=1e-7)


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tiny_config, tmp_path, monkeypatch):
    import training.engine as training_module

    real = training_module.train_loss
    calls = {"n": 0}

    def poisoned(model, *args):
        calls["n"] += 1
        loss, *rest = real(model, *args)
        if calls["n"] > 5:  # update 6, after the step-4 checkpoint
            loss = loss * float("nan")
        return (loss, *rest)

    monkeypatch.setattr(training_module, "train_loss", poisoned)
    run_dir = tmp_path / "run"
    with pytest.raises(UserError, match=r"nan at update 6.*last good checkpoint.*last\.pt \(step 4\)"):
        run(["--config", tiny_config, "--run-dir", run_dir, "train.max_steps=50"])
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == 4


def test_unwritable_run_directory_is_a_one_line_error(tiny_config, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = subprocess.run([sys.executable, "train.py", "--config", str(tiny_config), "--run-dir",
                           str(blocker / "run")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: cannot write to run directory")
    assert "Traceback" not in proc.stderr


def test_sigterm_saves_a_checkpoint_and_resume_continues(tiny_config, tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "train.py", "--config", str(tiny_config), "--run-dir", str(run_dir),
                             "train.max_steps=100000", "train.max_epochs=1000", "train.eval_every=0"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (run_dir / "metrics.jsonl").is_file():
        time.sleep(0.2)
    while time.time() < deadline and len(records(run_dir, "train")) < 3:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "SIGTERM" in err and "--resume" in err and "Traceback" not in err
    step = load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"]
    assert step >= 3
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stopped_by"] == "SIGTERM" and "last_finished" not in manifest  # stopped, not finished
    run(["--resume", run_dir, f"train.max_steps={step + 2}"])
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == step + 2
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stopped_by"] is None and manifest["steps"] == step + 2 and "last_finished" in manifest


def test_two_process_data_parallel_training_on_cpu(tiny_config, tmp_path):
    run_dir = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                           "--master_port=29531", "train.py", "--config", str(tiny_config), "--run-dir",
                           str(run_dir), "train.max_steps=2", "train.eval_every=2"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [p.name for p in (run_dir / "checkpoints").glob("last.pt")] == ["last.pt"]
    assert all(torch.isfinite(torch.tensor(p["loss"])) for p in records(run_dir, "train"))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["world_size"] == 2 and manifest["steps"] == 2
    digests = manifest["rank_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]


def test_early_stopping_after_patience_validations_without_improvement(tiny_config, tmp_path):
    run_dir = tmp_path / "run"
    # lr 0: the first validation sets the best score, the next ones cannot beat it
    run(["--config", tiny_config, "--run-dir", run_dir, "train.lr=0", "train.max_steps=100",
         "train.eval_every=2", "train.patience=2", "train.best_metric=loss"])
    assert [p["step"] for p in records(run_dir, "valid")] == [2, 4, 6]
    assert load_checkpoint(run_dir / "checkpoints" / "best.pt")["step"] == 2


def test_weights_digest_covers_scalar_parameters_and_detects_changes():
    from experiment.config import load_config
    from models.transformer import Transformer
    from training.loop import weights_digest

    cfg = load_config(None, ["model.positional.name=fire", "model.d_model=16", "model.n_heads=2",
                             "model.n_encoder_layers=1", "model.n_decoder_layers=1", "model.d_ff=32"]).model
    model = Transformer(cfg, 20, 20)
    before = weights_digest(model)
    assert before == weights_digest(model)
    with torch.no_grad():
        model.encoder_pe.log_c.add_(1e-3)  # a 0-dim parameter
    assert weights_digest(model) != before


def test_overrides_may_come_between_options():
    args = train.parse_args(["--config", "a.yaml", "train.lr=1e-3", "--run-dir", "r", "seed=2"])
    assert (args.config, args.run_dir, args.overrides) == ("a.yaml", "r", ["train.lr=1e-3", "seed=2"])


def test_training_releases_its_session_before_returning(tiny_config, tmp_path, monkeypatch):
    """The model (under torchrun: the DDP model, whose reducer holds the process group) and the
    engines are freed by the time train() returns, while the process group still exists — not at
    the interpreter's exit, where gloo's threads aborted rank 1 of the two-process run."""
    import weakref

    import training.loop as loop
    from experiment.config import load_config

    alive: list[weakref.ref] = []
    build = loop.build_session

    def watched(*args, **kwargs):
        session = build(*args, **kwargs)
        alive.extend([weakref.ref(session.model), weakref.ref(session.trainer), weakref.ref(session.optimizer)])
        return session

    monkeypatch.setattr(loop, "build_session", watched)
    loop.train(load_config(tiny_config, ["train.max_steps=2", "train.eval_every=2"]), tmp_path / "run")
    assert len(alive) == 3 and all(ref() is None for ref in alive)
