"""The plan cache, an in-memory LRU of plans (thread-safe), and the counts of every cache, read as
``frost.cache_stats()``. Plans are keyed by whatever identifies them (graph + target + engine, or a functional call's
tensor metadata); building a plan never compiles a kernel twice (compiler.compiled_kernel). The plan cache counts
its own hits, misses and evictions under the lock it already holds, so a hit costs one lock; the kernel and disk
caches bump COUNTERS."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Hashable, TypeVar

from frost import settings

T = TypeVar("T")
DEFAULT_SIZE = settings.count("FROST_PLAN_CACHE_SIZE", 256)


class PlanCache:
    def __init__(self, max_size: int = DEFAULT_SIZE) -> None:
        self.max_size = max_size
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, object] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}
        self.counts = {"hits": 0, "misses": 0, "evictions": 0}

    def get(self, key: Hashable) -> Any:
        """The cached plan or None; a hit is counted and refreshes the entry."""
        with self._lock:
            plan = self._items.get(key)
            if plan is not None:
                self._items.move_to_end(key)
                self.counts["hits"] += 1
            return plan

    def get_or_build(self, key: Hashable, build: Callable[[], T]) -> T:
        """Serve `key` from memory or build it once, even when several threads ask at the same time."""
        plan: T | None = self.get(key)
        if plan is not None:
            return plan
        with self._lock:
            gate = self._building.setdefault(key, threading.Lock())
        with gate:
            plan = self.get(key)
            if plan is not None:
                return plan
            with self._lock:
                self.counts["misses"] += 1
            plan = build()
            self._put(key, plan)
        with self._lock:
            self._building.pop(key, None)
        return plan

    def _put(self, key: Hashable, plan: object) -> None:
        with self._lock:
            self._items[key] = plan
            self._items.move_to_end(key)
            while len(self._items) > max(self.max_size, 0):
                self._items.popitem(last=False)
                self.counts["evictions"] += 1

    def resize(self, max_size: int) -> None:
        self.max_size = max_size
        with self._lock:
            while len(self._items) > max(max_size, 0):
                self._items.popitem(last=False)
                self.counts["evictions"] += 1

    def snapshot_counts(self, reset: bool = False) -> dict[str, int]:
        """The hit, miss and eviction counts (then zeroed when ``reset``)."""
        with self._lock:
            counts = dict(self.counts)
            if reset:
                self.counts = dict.fromkeys(counts, 0)
            return counts

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


PLANS = PlanCache()


@dataclass(frozen=True)
class CacheStats:
    hits: int = 0          # plan cache: a plan served from memory
    misses: int = 0        # plan cache: a plan built (lowered) anew
    compiles: int = 0      # kernels actually compiled (neither in memory nor on disk)
    evictions: int = 0     # plans dropped by the LRU
    kernel_hits: int = 0   # a compiled kernel reused from memory by a new plan
    disk_hits: int = 0     # a compiled kernel loaded from the disk cache
    disk_writes: int = 0
    disk_errors: int = 0   # corrupt or stale disk entries that were recompiled
    report_hits: int = 0   # a probe report read from the disk cache instead of analysing the graph
    report_writes: int = 0
    report_errors: int = 0  # corrupt or stale report entries (the graph was probed again)

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def __sub__(self, other: "CacheStats") -> "CacheStats":
        return CacheStats(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})


class _Counters:
    """Plain ints under a lock (the counts of the caches that do not keep their own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(CacheStats.__dataclass_fields__, 0)

    def bump(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def snapshot(self) -> CacheStats:
        with self._lock:
            counts = dict(self._counts)
        return CacheStats(**(counts | PLANS.snapshot_counts()))

    def reset(self) -> None:
        with self._lock:
            self._counts = dict.fromkeys(self._counts, 0)
        PLANS.snapshot_counts(reset=True)


COUNTERS = _Counters()


def cache_stats() -> CacheStats:
    """A snapshot of the counters since start (or the last `reset_cache_stats`); subtract two to get a delta."""
    return COUNTERS.snapshot()


def reset_cache_stats() -> None:
    COUNTERS.reset()
