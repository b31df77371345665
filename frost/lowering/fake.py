"""A fake compiler for machines without a GPU: its kernels bind and record launches and touch nothing, so tests can
drive the cute_sm120 engine's whole host path (probe, lowering, caches, executor) on CPU tensors, for the forward
and the backward alike, and the host-overhead benchmark can time execute with the kernels excluded."""

from __future__ import annotations

import threading

from frost.lowering.compiler import KernelUnit

PREFIX = b"frost-fake-kernel\n"


class FakeKernel:
    """Binds like the real kernels (frost.kernels.backward.api.CompiledBackward.bind, and
    frost.kernels.forward.api.CompiledForward.bind): ``bind(problem)`` records the problem (or the forward's mask)
    and returns a launch that records what it is called with (a call's tensors object, the stream and the
    backward's seq_major) and does nothing else. ``record=False``: the launch records nothing (a benchmark's calls
    then keep no tensor alive, as the real launches keep none)."""

    def __init__(self, key: str, record: bool = True) -> None:
        self.key = key
        self.record = record
        self.problems: list = []
        self.launches: list[tuple[object, dict]] = []   # (tensors, {"stream": ..., other options}) per launch

    def bind(self, *bound):
        """What a lowering binds: a backward's Problem, a forward's (scale, mask)."""
        self.problems.append(bound[0] if len(bound) == 1 else bound)
        if not self.record:
            return _no_op
        return lambda tensors, stream=None, **options: self.launches.append((tensors, {"stream": stream} | options))


def _no_op(tensors: object, stream: object = None, **options: object) -> None:
    return None


class FakeCompiler:
    """Counts compiles and keeps the kernels it compiled (tests read their launches back); serialises a kernel as
    its key, so a disk round trip can be checked byte for byte. ``record``: whether its kernels record their
    launches (FakeKernel)."""

    def __init__(self, name: str = "fake", device_type: str = "cpu", persist: bool = True, record: bool = True) -> None:
        self.name, self.device_type, self.persist, self.record = name, device_type, persist, record
        self.compiled: list[str] = []
        self.kernels: list[FakeKernel] = []
        self._lock = threading.Lock()

    def compile(self, unit: KernelUnit) -> FakeKernel:
        kernel = FakeKernel(unit.key, self.record)
        with self._lock:
            self.compiled.append(unit.key)
            self.kernels.append(kernel)
        return kernel

    def serialize(self, kernel: FakeKernel, unit: KernelUnit) -> bytes | None:
        return PREFIX + kernel.key.encode() if self.persist else None

    def deserialize(self, data: bytes, unit: KernelUnit) -> FakeKernel:
        if data != PREFIX + unit.key.encode():
            raise ValueError("not a fake kernel for this key")
        return FakeKernel(unit.key, self.record)

    def bind(self, kernel: FakeKernel, config) -> FakeKernel:
        return kernel
