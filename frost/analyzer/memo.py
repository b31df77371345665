"""Memoise a function of one graph by object identity.

A Graph is frozen, so what the analyzer derives from it never changes; repeated probes of the same graph object
(a training loop asking every step) then pay only a dict lookup. Identity, not equality: hashing a graph would cost
more than analysing it. Entries leave with their graph (weakref callback)."""

from __future__ import annotations

import weakref
from functools import partial, wraps
from typing import Any, Callable, TypeVar

G = TypeVar("G")
T = TypeVar("T")


def per_graph(fn: Callable[[G], T]) -> Callable[[G], T]:
    cache: dict[int, tuple[weakref.ref[Any], T]] = {}

    @wraps(fn)
    def cached(graph: G) -> T:
        key = id(graph)
        hit = cache.get(key)
        if hit is not None and hit[0]() is graph:
            return hit[1]
        value = fn(graph)
        cache[key] = (weakref.ref(graph, partial(_drop, key)), value)
        return value

    def _drop(key: int, ref: weakref.ref[Any]) -> None:
        hit = cache.get(key)
        if hit is not None and hit[0] is ref:
            del cache[key]

    cached.cache_clear = cache.clear  # type: ignore[attr-defined]
    cached.cache_size = cache.__len__  # type: ignore[attr-defined]
    cached.uncached = fn  # type: ignore[attr-defined]
    return cached
