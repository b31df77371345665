"""A device argument (plan.new_outputs, plan.new_workspace, frost.detect_target) checked once: torch would raise
its own RuntimeError or AssertionError for a string that names no device, a float, or a CUDA device this machine
lacks."""

from __future__ import annotations

from typing import Optional

import torch

from frost.errors import ArgumentTypeError, TensorError

DEVICE_ACCEPTED = "None, a torch.device, a device string such as 'cpu' or 'cuda:0', or a CUDA device index"


def parsed_device(device: object, name: str = "device") -> Optional[torch.device]:
    """``device`` as a torch.device (None stays None); an ArgumentTypeError for a type torch.device does not take,
    a TensorError for a string or index that names no device."""
    if device is None:
        return None
    if isinstance(device, bool) or not isinstance(device, (torch.device, str, int)):
        raise ArgumentTypeError(name, device, DEVICE_ACCEPTED)
    try:
        return torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        # an index is a device torch cannot make without an accelerator: say what this machine has
        raise TensorError(name, device, _present() if isinstance(device, int) else DEVICE_ACCEPTED) from None


def present_device(device: object, name: str = "device") -> Optional[torch.device]:
    """parsed_device, and a CUDA device must exist on this machine (memory is to be allocated there)."""
    d = parsed_device(device, name)
    if d is not None and d.type == "cuda" and (d.index or 0) >= torch.cuda.device_count():   # 0 without CUDA
        raise TensorError(name, device, _present())
    return d


def _present() -> str:
    return f"a device of this machine (it has {torch.cuda.device_count()} CUDA devices)"


__all__ = ["DEVICE_ACCEPTED", "parsed_device", "present_device"]
