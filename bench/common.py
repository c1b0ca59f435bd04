"""Shared set-up of the benchmarks: the benchmark model, its batches, device, peak memory."""
from __future__ import annotations

import multiprocessing as mp
import resource
from typing import Any, Callable

import torch

from experiment.config import load_config
from models.config import ModelConfig
from utils.device import device_name as _device_name

VOCAB = 8000
PAD, UNK, BOS, EOS = 0, 1, 2, 3


def bench_model_config(scheme: str = "sinusoidal") -> ModelConfig:
    """The benchmark model: d_model 256, 4 heads, 3+3 layers, ffn 1024, joint vocabulary 8000."""
    return load_config(None, ["model.d_model=256", "model.n_heads=4", "model.n_encoder_layers=3",
                              "model.n_decoder_layers=3", "model.d_ff=1024", "model.dropout=0.1",
                              f"model.positional.name={scheme}"]).model


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_name() -> str:
    return _device_name(device())


def peak_rss_mb() -> float:
    """Peak resident memory of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_memory_mb() -> float:
    """Peak GPU memory on CUDA, else the process's peak resident memory."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return peak_rss_mb()


def in_subprocess(fn: Callable[..., Any], *args) -> Any:
    """Run fn(*args) in a fresh process (its own peak memory), return its result."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
