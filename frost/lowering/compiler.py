"""How an engine gets a compiled kernel: from the kernel cache in memory, else from the disk cache, else from the
Compiler installed for the engine (then persisted). Equal compile keys share one kernel, so a new batch size or
sequence length (a new plan) never recompiles, and concurrent requests for one key compile it once. The compiler is
a seam: tests (and the host-overhead benchmark) inject a fake one on a machine without a GPU, and the real CuTe-DSL
toolchain is imported only when something compiles."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

from frost.kernels.compile_cache import CompileCache
from frost.lowering.disk_cache import DiskCache, EntryKey, active_disk_cache
from frost.lowering.plan_cache import COUNTERS

log = logging.getLogger("frost")


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


# (compiler name, arch, compile key) -> kernel
KERNELS: CompileCache[tuple[str, str, str], Any] = CompileCache(on_hit=lambda: COUNTERS.bump("kernel_hits"))


def compiled_kernel(compiler: Compiler, unit: KernelUnit) -> Any:
    """``unit``'s kernel from ``compiler``: from memory, else loaded from the disk cache, else compiled (once,
    however many threads ask at the same time) and persisted."""
    return KERNELS.get((compiler.name, unit.arch, unit.key), lambda _: _load_or_compile(compiler, unit))


def _load_or_compile(compiler: Compiler, unit: KernelUnit) -> Any:
    disk = active_disk_cache()
    key = EntryKey(unit.key, unit.arch, compiler.name)
    data = disk.load(key) if disk is not None else None
    if data is not None:
        try:
            start = time.perf_counter()
            kernel = compiler.deserialize(data, unit)
            COUNTERS.bump("disk_hits")
            log.debug("frost: loaded %s from the disk cache in %.2f s", unit.key, time.perf_counter() - start)
            return kernel
        except Exception as exc:  # noqa: BLE001 -- any failure to load means "recompile", never a crash
            disk.discard(key, f"unloadable ({type(exc).__name__}: {exc})")
    start = time.perf_counter()
    kernel = compiler.compile(unit)
    COUNTERS.bump("compiles")
    log.debug("frost: compiled %s for %s in %.2f s", unit.key, unit.arch, time.perf_counter() - start)
    if disk is not None:
        _persist(disk, key, compiler, kernel, unit)
    return kernel


def _persist(disk: DiskCache, key: EntryKey, compiler: Compiler, kernel: Any, unit: KernelUnit) -> None:
    try:
        data = compiler.serialize(kernel, unit)
    except Exception as exc:  # noqa: BLE001 -- persisting is an optimisation; the kernel in memory is fine
        log.warning("frost: cannot persist kernel %s (%s: %s)", unit.key, type(exc).__name__, exc)
        return
    if data is not None:
        disk.store(key, data)
