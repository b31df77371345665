"""Median latency of the support probe on a gpt-oss-like graph (target: <= 100 us per call).

Two numbers: `warm` probes the same graph object again (the analysis is memoised per graph object, as in a training
loop that asks every step); `cold` clears every memo before each call (a graph and shapes seen for the first time).

    python benchmarks/bench_probe.py [--calls 2000] [--target sm_120]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from frost.analyzer import analyze, probe, to_networkx
from frost.analyzer.facts import _memory
from frost.ir import sdpa_backward_graph


def gpt_oss_graph():
    return sdpa_backward_graph(2, 64, 4096, 64, heads_kv=8, sink=True, padded=True, causal=True,
                               alignment="bottom_right", band_left=128)


def _median_ns(fn, calls: int, before=None) -> float:
    for _ in range(max(calls // 10, 50)):
        before and before()
        fn()
    samples = []
    gc.disable()  # as timeit does: a collection landing in one sample measures the heap, not the probe
    for _ in range(calls):
        before and before()
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    gc.enable()
    return statistics.median(samples)


def _clear() -> None:
    analyze.cache_clear()
    to_networkx.cache_clear()
    _memory.cache_clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--target", default="sm_120")
    args = ap.parse_args()
    graph = gpt_oss_graph()
    report = probe(graph, args.target)
    warm = _median_ns(lambda: probe(graph, args.target), args.calls)
    cold = _median_ns(lambda: probe(graph, args.target), args.calls, before=_clear)
    print(f"probe(gpt-oss-like graph, {args.target!r}) -> engine {report.engines}, supported={report.supported}")
    print(f"median over {args.calls} calls: warm {warm / 1000:.1f} us, cold {cold / 1000:.1f} us (target <= 100 us)")
    # on a shared or throttled machine every number scales together; this says how fast this one is right now
    print(f"machine yardstick: sum(range(1000)) {_median_ns(lambda: sum(range(1000)), args.calls) / 1000:.1f} us")


if __name__ == "__main__":
    main()
