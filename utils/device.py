"""Devices: what one is called in manifests and logs, the ``--device`` check, thread settings."""
from __future__ import annotations

import os
import platform

import torch

from utils.errors import UserError
from utils.threads import current_claim


def device_name(device: str | torch.device) -> str:
    """``NVIDIA H100 80GB HBM3`` for a GPU; ``cpu (x86_64, 2 threads)`` for the CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def cpu_model() -> str:
    """The CPU's model name (``AMD EPYC 9454``, from /proc/cpuinfo on Linux), else what the
    platform module knows (often only the architecture)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


SHARING_ENV = "NMT_RUNS_SHARING_MACHINE"  # set by a study's executor: its runs training at once on this machine


def sharing_record() -> dict[str, object]:
    """What a manifest records, at a run's start, of what else used the machine — for reading its
    timing: the runs its study's executor trains at once (``SHARING_ENV``; None where no executor
    said, e.g. a run started by hand), the 1-minute load average, and how the process's threads were
    chosen (``utils.threads``; None where no command chose them, e.g. a library call)."""
    runs = os.environ.get(SHARING_ENV, "")
    claim = current_claim()
    return {"runs_sharing_machine": int(runs) if runs.isdigit() else None,
            "load_average": round(os.getloadavg()[0], 2),
            "thread_choice": claim.reason if claim is not None else None}


def reset_peak_memory(device: str | torch.device) -> None:
    """Start measuring the peak memory anew (GPU: the allocator's peak; a CPU process's peak RSS
    cannot be reset, so there it is the process's whole life)."""
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(torch.device(device))


def peak_memory_mb(device: str | torch.device) -> float:
    """The peak memory since ``reset_peak_memory`` in MiB: GPU tensors allocated, or the process's
    peak resident set on a CPU."""
    if torch.device(device).type == "cuda":
        return torch.cuda.max_memory_allocated(torch.device(device)) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# The environment variables that pin a CPU run's arithmetic beyond PyTorch's own kernel set: MKL's code
# path (conditional numerical reproducibility) and oneDNN's highest instruction set. With the kernel set,
# one thread and these, two x86-64 CPUs of different models compute the same floats (scoring.arithmetic).
MATH_PIN_VARIABLES = ("MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


def host_record() -> dict[str, object]:
    """What a manifest records of the machine beside the device: the CPU model, the kernel set
    PyTorch chose for it (``AVX512``, ``AVX2``, ``DEFAULT``: results differ in the last bits between
    kernel sets), the intra-op threads and the libraries' pinned code paths (``MATH_PIN_VARIABLES``
    that are set; None when none is)."""
    pins = {name: os.environ[name] for name in MATH_PIN_VARIABLES if os.environ.get(name)}
    return {"cpu": cpu_model(), "cpu_kernels": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(), "math_pins": pins or None}


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
