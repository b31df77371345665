"""A fake compiler for machines without a GPU: its kernels record launches and touch nothing, so tests can drive
the cute_sm120 engine's whole host path (probe, lowering, caches, executor) on CPU tensors, and the host-overhead
benchmark can time execute with the kernels excluded."""

from __future__ import annotations

import threading

from frost.lowering.compiler import KernelUnit

PREFIX = b"frost-fake-kernel\n"


class FakeKernel:
    def __init__(self, key: str) -> None:
        self.key = key
        self.calls = 0
        self.last_features: dict = {}

    def __call__(self, *tensors, scale: float, workspace: dict, stream=None, **features) -> None:
        """Accepts the runtime feature keywords of the real kernels (lengths, band, sink, deterministic...)."""
        self.calls += 1
        self.last_features = features


class FakeCompiler:
    """Counts compiles; serialises a kernel as its key, so a disk round trip can be checked byte for byte."""

    def __init__(self, name: str = "fake", device_type: str = "cpu", persist: bool = True) -> None:
        self.name, self.device_type, self.persist = name, device_type, persist
        self.compiled: list[str] = []
        self._lock = threading.Lock()

    def compile(self, unit: KernelUnit) -> FakeKernel:
        with self._lock:
            self.compiled.append(unit.key)
        return FakeKernel(unit.key)

    def serialize(self, kernel: FakeKernel, unit: KernelUnit) -> bytes | None:
        return PREFIX + kernel.key.encode() if self.persist else None

    def deserialize(self, data: bytes, unit: KernelUnit) -> FakeKernel:
        if data != PREFIX + unit.key.encode():
            raise ValueError("not a fake kernel for this key")
        return FakeKernel(unit.key)

    def bind(self, kernel: FakeKernel, config) -> FakeKernel:
        return kernel
