"""Where a backward's GPU time goes, kernel by kernel (torch.profiler), for the gpt-oss cases
(causal + sink, and 128-token window + sink).

The window + sink target is relative to the causal run, and the window's main kernel is short, so the fixed costs
of the preprocess (delta, dQ accumulator zeroing) and the dQ conversion matter there; this prints each kernel's
mean time per call for both cases.

    python benchmarks/profile_split.py [--iters 20]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import torch
from bench_kernels import GqaCase
from torch.profiler import ProfilerActivity, profile


def kernel_times(fn, iters: int) -> dict[str, float]:
    """Mean GPU microseconds per call of each kernel ``fn`` launches."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            totals[ev.name[:60]] += ev.device_time / iters
    return dict(totals)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    gpt = GqaCase(2, 64, 8, 4096, 64, torch.bfloat16)
    cases = {"causal + sink": dict(with_sink=True), "window 128 + sink": dict(with_sink=True, band_left=128)}
    for name, features in cases.items():
        times = kernel_times(gpt.frost_fn(**features), args.iters)
        print(f"gpt-oss 2,64,8,4096,64 {name}: {sum(times.values()):.1f} us of kernels per call")
        for kernel, us in sorted(times.items(), key=lambda kv: -kv[1]):
            print(f"  {us:9.1f} us  {kernel}")


if __name__ == "__main__":
    main()
