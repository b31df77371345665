"""Cache statistics of the plan cache, the kernel cache and the disk caches, readable as `frost.cache_stats()`. The
kernel and disk caches bump COUNTERS; the plan cache counts under its own lock and is read here."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, fields

from frost.lowering.plan_cache import PLANS


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
