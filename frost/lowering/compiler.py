"""The compiler seam: engines ask a Compiler for kernels, so tests (and the host-overhead benchmark) can inject a
fake one on a machine without a GPU, and the real CuTe-DSL toolchain is imported only when something compiles."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol


@dataclass(frozen=True)
class KernelUnit:
    """One thing to compile. `key` identifies the generated code (equal keys => interchangeable kernels);
    `config` is the engine's own description (e.g. a frost.kernels.backward.api.KernelConfig)."""

    engine: str
    key: str
    arch: str
    config: Any = field(compare=False, default=None)


class Compiler(Protocol):
    name: str          # part of the disk-cache key: kernels from different compilers never mix
    device_type: str   # where its kernels run ("cuda"; a fake compiler's kernels run on "cpu")

    def compile(self, unit: KernelUnit) -> Any:
        """A callable kernel for `unit`."""

    def serialize(self, kernel: Any, unit: KernelUnit) -> bytes | None:
        """Bytes to persist, or None when this kernel cannot be persisted (then it is only kept in memory)."""

    def deserialize(self, data: bytes, unit: KernelUnit) -> Any:
        """The kernel back from `serialize`'s bytes; raise anything on bad data (it is then recompiled)."""

    def bind(self, kernel: Any, config: Any) -> Any:
        """A launcher for `config` from a kernel compiled for any config with the same key (runtime values such as
        the mask or the logical head dims live in the config, not in the compiled code)."""


_defaults: dict[str, Callable[[], Compiler]] = {}
_active: dict[str, Compiler] = {}
generation = 0   # bumped whenever a compiler is installed: plan keys hold it, so no plan outlives its compiler


def register_default(engine: str, factory: Callable[[], Compiler]) -> None:
    """Called by an engine module: how to make its real compiler, when first needed."""
    _defaults[engine] = factory


def get_compiler(engine: str) -> Compiler:
    compiler = _active.get(engine)
    if compiler is None:
        compiler = _active[engine] = _defaults[engine]()
    return compiler


def set_compiler(engine: str, compiler: Compiler | None) -> Compiler | None:
    """Install `compiler` for `engine` (None restores the default); returns the previous one."""
    global generation
    generation += 1
    previous = _active.pop(engine, None)
    if compiler is not None:
        _active[engine] = compiler
    return previous


@contextmanager
def use_compiler(engine: str, compiler: Compiler) -> Iterator[Compiler]:
    """`with use_compiler("cute_sm120", FakeCompiler()):` -- plans built inside use the fake."""
    previous = set_compiler(engine, compiler)
    try:
        yield compiler
    finally:
        set_compiler(engine, previous)
