"""detect_target(): the device this process would run on, as a probe target. Outside the analyzer because it may
import torch (lazily, only here)."""

from __future__ import annotations


def detect_target() -> str:
    """"cpu" without an importable torch or a CUDA device; else "sm_<major><minor>" of the current device."""
    try:
        import torch
    except ImportError:
        return "cpu"
    if not torch.cuda.is_available():
        return "cpu"
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"
