"""In-memory LRU of plans, thread-safe. Plans are keyed by whatever identifies them (graph + target + engine, or a
functional call's tensor metadata); building a plan never compiles a kernel twice (see kernel_cache)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

from frost.lowering.stats import COUNTERS

T = TypeVar("T")
DEFAULT_SIZE = int(os.environ.get("FROST_PLAN_CACHE_SIZE", "256"))


class PlanCache:
    def __init__(self, max_size: int = DEFAULT_SIZE) -> None:
        self.max_size = max_size
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, object] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable):
        """The cached plan or None; a hit is counted and refreshes the entry."""
        with self._lock:
            plan = self._items.get(key)
            if plan is not None:
                self._items.move_to_end(key)
                COUNTERS.bump("hits")
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
            COUNTERS.bump("misses")
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
                COUNTERS.bump("evictions")

    def resize(self, max_size: int) -> None:
        self.max_size = max_size
        with self._lock:
            while len(self._items) > max(max_size, 0):
                self._items.popitem(last=False)
                COUNTERS.bump("evictions")

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


PLANS = PlanCache()
