"""In-memory LRU of plans, thread-safe. Plans are keyed by whatever identifies them (graph + target + engine, or a
functional call's tensor metadata); building a plan never compiles a kernel twice (see kernel_cache). The cache
counts its own hits, misses and evictions under the lock it already holds (frost.lowering.stats reads them), so a
hit costs one lock."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

T = TypeVar("T")
DEFAULT_SIZE = int(os.environ.get("FROST_PLAN_CACHE_SIZE", "256"))


class PlanCache:
    def __init__(self, max_size: int = DEFAULT_SIZE) -> None:
        self.max_size = max_size
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, object] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}
        self.counts = {"hits": 0, "misses": 0, "evictions": 0}

    def get(self, key: Hashable):
        """The cached plan or None; a hit is counted and refreshes the entry."""
        with self._lock:
            plan = self._items.get(key)
            if plan is not None:
                self._items.move_to_end(key)
                self.counts["hits"] += 1
            return plan

    def get_or_build(self, key: Hashable, build: Callable[[], T]) -> T:
        """Serve `key` from memory or build it once, even when several threads ask at the same time."""
        plan = self.get(key)
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
