"""Devices: what one is called in manifests and logs, the ``--device`` check, thread settings."""
from __future__ import annotations

import platform

import torch

from utils.errors import UserError


def device_name(device: str | torch.device) -> str:
    """``NVIDIA H100 80GB HBM3`` for a GPU; ``cpu (x86_64, 2 threads)`` for the CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def resolve_device(name: str) -> torch.device:
    """``--device`` checked once at the command line: a device torch knows and this machine has
    (``cuda`` without a GPU, or ``cuda:3`` on a one-GPU machine, is a one-line ``UserError``)."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise UserError(f"unknown device '{name}' (use cpu, cuda or cuda:N)") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(f"device '{name}' asked for, but this machine has no usable CUDA GPU (use --device cpu)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise UserError(f"device '{name}' asked for, but this machine has {torch.cuda.device_count()} GPU(s)")
    elif device.type != "cpu":
        raise UserError(f"device '{name}' is not supported here (use cpu, cuda or cuda:N)")
    return device


def set_threads(threads: int | None) -> None:
    """Intra-op threads for this process: ``threads`` if given (>= 1), else leave torch's default.

    Decoding a small model is latency-bound: on a busy 2-core machine scoring the demo model ran
    at 12.7 sentences/s with torch's default threads and at 165.8 with one thread, so the
    decoding commands default to 1 (``--threads``)."""
    if threads is None:
        return
    if threads < 1:
        raise UserError(f"--threads must be at least 1 (got {threads})")
    torch.set_num_threads(threads)
