"""detect_target(): the device this process would run on, as a probe target. Outside the analyzer because it may
import torch (lazily, only here)."""

from __future__ import annotations


def detect_target(device=None) -> str:
    """"cpu" without an importable torch, a CUDA device, or for a non-CUDA `device`; else "sm_<major><minor>" of
    `device` (default: the current CUDA device)."""
    try:
        import torch
    except ImportError:
        return "cpu"
    if device is not None and torch.device(device).type != "cuda" or not torch.cuda.is_available():
        return "cpu"
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"
