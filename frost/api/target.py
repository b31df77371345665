"""detect_target(): the device this process would run on, as a probe target; target_of(device): the same for a
tensor's device, memoised. Outside the analyzer because it may import torch (lazily, only here)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import torch

Device = Union["torch.device", str, int]   # what torch.device() accepts
_targets: dict[Device | None, str] = {}


def detect_target(device: Device | None = None) -> str:
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


def target_of(device: Device) -> str:
    """The probe target for tensors on ``device`` ("cpu", or sm_XY of that CUDA device), memoised per device."""
    target = _targets.get(device)
    if target is None:
        target = _targets[device] = detect_target(device)
    return target
