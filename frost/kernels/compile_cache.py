"""The in-process cache of compiled kernels by compile key: each key compiles once per process, and threads that ask
for it at the same time wait for that one compile and share its result. The kernel library keeps its compiled
kernels here by their own keys; frost.lowering keeps the kernels its plans launch in one too (by the plan's compile
key, with the disk cache behind it)."""

from __future__ import annotations

import threading
from typing import Callable, Generic, Hashable, Optional, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class CompileCache(Generic[K, V]):
    """``compile_fn(key)`` makes a key's kernel (a call to ``get`` may pass its own); ``on_hit()`` is called each
    time a kernel is served without compiling (frost.lowering counts those)."""

    def __init__(self, compile_fn: Optional[Callable[[K], V]] = None,
                 on_hit: Optional[Callable[[], object]] = None) -> None:
        self._compile = compile_fn
        self._on_hit = on_hit
        self._done: dict = {}
        self._gates: dict = {}
        self._lock = threading.Lock()

    def get(self, key: K, compile_fn: Optional[Callable[[K], V]] = None) -> V:
        """The compiled kernel of ``key``: from memory, else compiled by ``compile_fn`` (default: the cache's own).
        A failed compile stores nothing, so the next request tries again."""
        hit = self._done.get(key)
        if hit is None:
            with self._lock:
                gate = self._gates.setdefault(key, threading.Lock())
            with gate:
                hit = self._done.get(key)
                if hit is None:
                    hit = self._done[key] = (compile_fn or self._compile)(key)
                    return hit
        if self._on_hit is not None:
            self._on_hit()
        return hit

    def clear(self) -> None:
        with self._lock:
            self._done.clear()
            self._gates.clear()

    def __len__(self) -> int:
        return len(self._done)
