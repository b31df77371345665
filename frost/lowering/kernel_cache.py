"""Compiled kernels, in memory and on disk. Equal compile keys share one kernel, so a new batch size or sequence
length (a new plan) never recompiles; concurrent requests for one key compile it once."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from frost.lowering.compiler import Compiler, KernelUnit
from frost.lowering.disk_cache import EntryKey, active_disk_cache
from frost.lowering.stats import COUNTERS

log = logging.getLogger("frost")


class KernelCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kernels: dict[tuple[str, str, str], Any] = {}
        self._gates: dict[tuple[str, str, str], threading.Lock] = {}

    def get(self, compiler: Compiler, unit: KernelUnit) -> Any:
        ident = (compiler.name, unit.arch, unit.key)
        kernel = self._kernels.get(ident)
        if kernel is not None:
            COUNTERS.bump("kernel_hits")
            return kernel
        with self._lock:
            gate = self._gates.setdefault(ident, threading.Lock())
        with gate:
            kernel = self._kernels.get(ident)
            if kernel is None:
                kernel = self._kernels[ident] = _load_or_compile(compiler, unit)
            else:
                COUNTERS.bump("kernel_hits")
        return kernel

    def clear(self) -> None:
        with self._lock:
            self._kernels.clear()
            self._gates.clear()

    def __len__(self) -> int:
        return len(self._kernels)


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


def _persist(disk, key: EntryKey, compiler: Compiler, kernel: Any, unit: KernelUnit) -> None:
    try:
        data = compiler.serialize(kernel, unit)
    except Exception as exc:  # noqa: BLE001 -- persisting is an optimisation; the kernel in memory is fine
        log.warning("frost: cannot persist kernel %s (%s: %s)", unit.key, type(exc).__name__, exc)
        return
    if data is not None:
        disk.store(key, data)


KERNELS = KernelCache()
