"""An in-process cache of compiled kernels by compile key: each key compiles once per process, and threads that
ask for it at the same time share one result."""

from __future__ import annotations

import threading
from typing import Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class CompileCache(Generic[K, V]):
    def __init__(self, compile_fn: Callable[[K], V]) -> None:
        self._compile = compile_fn
        self._done: dict = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V:
        """The compiled kernel of ``key``; a race compiles twice but keeps (and returns) the first result."""
        with self._lock:
            hit = self._done.get(key)
        if hit is None:
            hit = self._compile(key)
            with self._lock:
                hit = self._done.setdefault(key, hit)
        return hit
