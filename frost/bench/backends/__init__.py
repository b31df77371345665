"""The backends `frost bench` measures, in table order. frost first; the rest are peers.

same_class marks the mma.sync-class peers (FA2 = torch flash, CUTLASS mem-efficient, FA4's SM120 kernels); torch's
cuDNN backend uses Hopper-specific kernels on an H200, so it is reported but not a same-class peer."""

from __future__ import annotations

from frost.bench.backends.base import Backend, Prepared
from frost.bench.backends.fa4 import Fa4Backend
from frost.bench.backends.frost_backend import FrostBackend
from frost.bench.backends.torch_sdpa import TorchSdpaBackend


def all_backends() -> list[Backend]:
    return [FrostBackend(), TorchSdpaBackend("FLASH_ATTENTION", same_class=True),
            TorchSdpaBackend("CUDNN_ATTENTION", same_class=False),
            TorchSdpaBackend("EFFICIENT_ATTENTION", same_class=True), Fa4Backend()]


def select(names: str | None) -> list[Backend]:
    """All backends, or those named in a comma-separated list (unknown names raise ValueError)."""
    backends = all_backends()
    if not names:
        return backends
    wanted = [n for n in names.split(",") if n]
    known = {b.name: b for b in backends}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"unknown backend(s) {unknown}; known: {', '.join(known)}")
    return [known[n] for n in wanted]


__all__ = ["Backend", "Prepared", "all_backends", "select"]
