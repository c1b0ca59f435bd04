"""What a device is called in manifests, benchmarks and logs."""
from __future__ import annotations

import platform

import torch


def device_name(device: str | torch.device) -> str:
    """``NVIDIA H100 80GB HBM3`` for a GPU; ``cpu (x86_64, 2 threads)`` for the CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
