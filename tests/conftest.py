"""Shared fixtures: the repository root, the session's own process registry, trained command-test
runs, the tiny 8-update training config, and the real Multi30k folder (via MULTI30K_DIR)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from utils.paths import ROOT

# A tiny model that really translates, on any CPU: 2,000 synthetic pairs, 600 updates of a cosine
# schedule (about 6 s a run). Measured under ATEN_CPU_CAPABILITY=default, avx2 and AVX-512: test
# BLEU 39-45 for each of the four runs below, 29 distinct greedy outputs of 30, none empty. (The former recipe,
# 100 updates of inverse_sqrt at lr 3.0 on 400 pairs, collapsed to BLEU 0 and one output for all
# inputs, which was empty or not depending on the CPU's rounding.)
TINY = """
base: {root}/configs/synthetic/base.yaml
data:
  cache_dir: {cache}
  test_splits: [test]
  synthetic:
    train: {{size: 2000, min_words: 3, max_words: 6}}
    validation: {{size: 20, min_words: 3, max_words: 6}}
    test: {{size: 30, min_words: 3, max_words: 6}}
tokenizer: {{vocab_size: 150}}
model: {{d_model: 64, n_heads: 2, n_encoder_layers: 1, n_decoder_layers: 1, d_ff: 128, dropout: 0.0}}
train: {{schedule: cosine, max_tokens: 800, max_steps: 600, warmup_steps: 30, lr: 5.0e-3, eval_every: 600,
        valid_bleu_sentences: 10}}
decode: {{beam: 3, max_len_a: 1.5, max_len_b: 3}}
"""

# The smallest run that exercises every part of training: 8 updates, validations at 4 and 8, two
# kept step checkpoints (train.py end to end, resume, the run lifecycle, the arithmetic of updates).
TINY_8 = """
base: {root}/configs/synthetic/base.yaml
seed: 3
data:
  cache_dir: {cache}
  test_splits: [test]
  synthetic:
    train: {{size: 300, min_words: 3, max_words: 7}}
    validation: {{size: 24, min_words: 3, max_words: 7}}
    test: {{size: 24, min_words: 3, max_words: 7}}
tokenizer: {{vocab_size: 150}}
model: {{d_model: 32, n_heads: 2, n_encoder_layers: 1, n_decoder_layers: 1, d_ff: 64, dropout: 0.1}}
train:
  schedule: inverse_sqrt
  max_tokens: 300
  max_steps: 8
  warmup_steps: 4
  lr: 1.0
  eval_every: 4
  log_every: 1
  keep_last: 2
  valid_bleu_sentences: 8
decode: {{max_len_a: 1.0, max_len_b: 4}}
"""


@pytest.fixture(scope="session", autouse=True)
def own_process_registry(tmp_path_factory):
    """The suite's processes counted by ``--threads auto`` (utils.threads) in a registry of the test
    session's own: a training running beside the tests (a study in the background) does not change the
    threads of the runs the tests train and compare, nor do the tests change its."""
    from utils.threads import REGISTRY_ENV

    before = os.environ.get(REGISTRY_ENV)
    os.environ[REGISTRY_ENV] = str(tmp_path_factory.mktemp("processes"))
    yield
    if before is None:
        os.environ.pop(REGISTRY_ENV, None)
    else:
        os.environ[REGISTRY_ENV] = before


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Tiny trained runs (synthetic data, 600 updates each) shared by the command tests."""
    from nmt import train

    folder = tmp_path_factory.mktemp("runs")
    config = folder / "tiny.yaml"
    config.write_text(TINY.format(root=ROOT, cache=folder / "cache"), encoding="utf-8")
    out = {}
    for name, overrides in {"sin1": ["seed=1"], "sin2": ["seed=2"],
                            "rope1": ["seed=1", "model.positional.name=rope"],
                            "learn1": ["seed=1", "model.positional.name=learnable"]}.items():
        out[name] = folder / name
        train.main(["--config", str(config), "--run-dir", str(out[name]), *overrides])
    return out


@pytest.fixture
def multi30k_dir() -> Path:
    """The Multi30k fr-en folder: MULTI30K_DIR's, else the checkout's folder `make data` fills (as the
    configs find it); the test is skipped when neither is there."""
    from data.fetch import data_folder

    path = data_folder("MULTI30K_DIR")
    if not os.environ.get("MULTI30K_DIR") and not path.is_dir():
        pytest.skip(f"MULTI30K_DIR is not set and {path} is not there (make data, or point MULTI30K_DIR at "
                    f"shared/data/multi30k-fr-en)")
    if not (path / "train.fr.gz").is_file():
        pytest.fail(f"{path} (MULTI30K_DIR, or make data's folder) does not hold train.fr.gz")
    return path


@pytest.fixture(scope="module")
def tiny_config(tmp_path_factory) -> Path:
    """``TINY_8`` written to a file, with its own token cache."""
    folder = tmp_path_factory.mktemp("cfg")
    path = folder / "tiny.yaml"
    path.write_text(TINY_8.format(root=ROOT, cache=folder / "cache"), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def slurm():
    """The one-node SLURM of ``tests/slurm_cluster.py``, started once for the session (whatever an
    earlier session left stopped first) and stopped at its end; the tests that need it are skipped,
    with the one-line reason, only where this machine cannot run it (no root, packages missing:
    ``make slurm`` installs them)."""
    from tests import slurm_cluster

    reason = slurm_cluster.unavailable()
    if reason:
        pytest.skip(reason)
    root = slurm_cluster.test_root(os.getpid())
    slurm_cluster.stop_stale_test_clusters()  # what a crashed or killed earlier session left
    try:
        cluster = slurm_cluster.start(root)
    except (RuntimeError, OSError) as err:
        slurm_cluster.stop(root)
        pytest.fail(f"the one-node SLURM did not start: {str(err).splitlines()[0]}")
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)  # for submitit's sbatch/sacct calls in this process
    try:
        yield cluster
    finally:
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        slurm_cluster.stop(root)
        shutil.rmtree(root, ignore_errors=True)


# one arithmetic (scoring.arithmetic) for the runs a test writes by hand, as a manifest records it
ARITHMETIC = {"device": "cpu (x86_64, 1 threads)", "cpu": "Test CPU", "cpu_kernels": "AVX2", "threads": 1,
              "packages": {"torch": "2.13.0+cpu"}, "precision": "fp32"}
ARITHMETIC_NOTE = "Arithmetic: every run CPU Test CPU, kernels AVX2, 1 thread, torch 2.13.0+cpu, fp32."


def arithmetic_manifest(**fields) -> dict:
    """A manifest.json tree recording ``ARITHMETIC`` and ``fields`` (fields of ``experiment.manifest.Manifest``)."""
    return {**ARITHMETIC, **fields}


def evaluation_record(**fields) -> dict:
    """results.json as ``search.evaluate`` writes it (every key of ``scoring.record.EvalRecord``),
    with ``fields`` set by the test and placeholders for the fields it does not read."""
    record = {"testset": "test", "run": "run", "checkpoint": "best.pt", "step": 1, "scheme": "sinusoidal",
              "bleu": 0.0, "bleu_ci95": [0.0, 0.0], "signature": "sig", "chrf": 0.0, "chrf_signature": "sig",
              "nltk_bleu4": 0.0, "nltk_tokenization": "13a", "seed_char_bleu4": 0.0, "seed_char_bleu4_note": "",
              "n_sentences": 0, "decode": {"beam": 1, "len_penalty": 1.0, "max_len_a": 1.5, "max_len_b": 10,
                                                  "batch_size": 64, "cut_sources": 0}, "engine": "torch", "seconds": 0.0,
              "sentences_per_second": 0.0, "by_length": [], "decoding_peak_mib": None,
              "sources_sha256": None, "references_sha256": None, "variant": None, "version": 3}
    unknown = set(fields) - set(record)
    assert not unknown, f"not a record key: {unknown}"
    return {**record, **fields}
