"""benchmarks/bench_autograd_host.py runs on a CPU (no-op kernels) and times every variant it names, so the GPU
call that needs it does not find it broken."""

from __future__ import annotations

import math

import bench_autograd_host as bench

from frost.lowering import FakeCompiler, use_compiler


def test_every_variant_is_timed_on_a_cpu():
    with use_compiler("cute_sm120", FakeCompiler(device_type="cpu", persist=False, record=False)), \
            bench._calls_target("cpu", "sm_120"):
        result = bench.measure("cpu", calls=20, rounds=1)
    assert set(result) == {"floor", "functional", "wrapped", "attention", "attention-1t"}
    assert all(math.isfinite(us) and us > 0 for us in result.values())
