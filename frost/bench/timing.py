"""Median GPU time of one timed call (a backward, a forward or a step), with CUDA events after warm-up.

Before each timed call a device-side sleep is queued, so the host's launch work overlaps it and the events measure
the GPU time of the call, not Python overhead (benchmarks/bench_host_overhead.py measures that). ``hold``: a
context manager (bench.sm120_hold.SmemHold) the timed calls run inside, after the warm-up; under it only the current
stream is synchronized (the holder runs on a stream of its own until released).

`host_us` measures the other side: the host time one call takes to return (argument checks, allocations, launches),
the calls enqueued back to back in short bursts with an untimed synchronisation before each, so the GPU's queue
never fills and makes the host wait."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Callable, Optional

SLEEP_CYCLES = 1_000_000        # ~0.5 ms at 2 GHz: longer than any backend's host work per call


@dataclass(frozen=True)
class Timing:
    ms: float                   # median of the timed calls
    calls: int                  # timed calls
    first_s: float              # wall time of the first call (includes compiling / plan building)


def plan_iters(first_ms: float, iters: int, max_seconds: float, min_iters: int = 3) -> int:
    """How many timed calls fit `max_seconds` given one call's time, between `min_iters` and `iters`."""
    if first_ms <= 0:
        return iters
    return max(min_iters, min(iters, int(max_seconds * 1e3 / first_ms)))


def median_ms(run: Callable[[int], object], n_sets: int, *, warmup: int = 3, iters: int = 20,
              max_seconds: float = 10.0, device: str = "cuda",
              hold: Optional[Callable[[], AbstractContextManager]] = None) -> Timing:
    """Median time of run(i % n_sets) after warm-up. device="cpu" uses the wall clock (a harness smoke run)."""
    first_s = _warm_up(run, n_sets, warmup, max_seconds / 2, device)
    with (hold or nullcontext)():
        timed = _wall_times if device != "cuda" else partial(_cuda_times, stream_only=hold is not None)
        first = timed(run, [0])[0]
        n = plan_iters(first, iters, max_seconds)
        times = timed(run, [i % n_sets for i in range(n)])
    return Timing(statistics.median(times), n, first_s)


HOST_BURST = 16                 # calls per burst: a few launches each, far below CUDA's launch queue depth
HOST_BURSTS = 5


def host_us(run: Callable[[int], object], n_sets: int, *, burst: int = HOST_BURST, bursts: int = HOST_BURSTS,
            device: str = "cuda") -> float:
    """Median over `bursts` bursts of the host time per call of run(i % n_sets), in microseconds (warm calls: run
    after median_ms). What a call returns is dropped before the next, as a training loop drops it."""
    samples = []
    for _ in range(bursts):
        _sync(device)
        start = time.perf_counter()
        for i in range(burst):
            run(i % n_sets)
        samples.append((time.perf_counter() - start) / burst * 1e6)
    _sync(device)
    return statistics.median(samples)


def _warm_up(run, n_sets: int, warmup: int, max_seconds: float, device: str) -> float:
    """Up to `warmup` calls, stopping once the calls after the first (which may compile) pass `max_seconds`;
    returns the first call's wall time."""
    t0 = time.perf_counter()
    run(0)
    _sync(device)
    first = time.perf_counter() - t0
    t1 = time.perf_counter()
    for i in range(1, warmup):
        run(i % n_sets)
        _sync(device)
        if time.perf_counter() - t1 > max_seconds:
            break
    return first


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _wall_times(run, order: list[int]) -> list[float]:
    times = []
    for i in order:
        t0 = time.perf_counter()
        run(i)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def _cuda_times(run, order: list[int], stream_only: bool = False) -> list[float]:
    import torch

    sync = torch.cuda.current_stream().synchronize if stream_only else torch.cuda.synchronize
    sync()
    events = []
    for i in order:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        _sleep()
        start.record()
        run(i)
        end.record()
        events.append((start, end))
    sync()
    return [s.elapsed_time(e) for s, e in events]


def _sleep() -> None:
    import torch

    try:
        torch.cuda._sleep(SLEEP_CYCLES)
    except (AttributeError, RuntimeError):
        pass
