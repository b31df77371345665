"""Where `frost.attention`'s forward + backward spends host time beyond its two functional calls.

On a GPU host `frost.attention` forward + backward has measured far more host time than `frost.sdpa_forward` plus
`frost.sdpa_backward` plus a Python autograd node that computes nothing (docs/performance.md, "Host time"). This
times, in one process and in alternating rounds, the same small problem (B1 S128 H4 d64 causal) through:

  floor        a torch.autograd.Function that only allocates its outputs and gradients
  functional   frost.sdpa_forward then frost.sdpa_backward, no autograd
  wrapped      the floor's node calling frost.sdpa_forward / frost.sdpa_backward (autograd + the functional calls)
  attention    frost.attention forward + autograd backward
  attention-1t the same with torch.autograd.set_multithreading_enabled(False): the backward runs on the calling
               thread instead of autograd's device thread
  *-noreplay   attention and functional with CUDA-graph replay off (FROST_GRAPH_REPLAY=0; the plans are rebuilt,
               their kernels come back from the disk cache)

Each value is the median over rounds of the host time per step (bursts with an untimed synchronisation before each,
bench_host_overhead._per_call_us). On a CPU the kernels are no-ops (the fake compiler); replay needs a GPU.

    python3 benchmarks/bench_autograd_host.py [--calls 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from contextlib import nullcontext

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench_host_overhead import _calls_target, _per_call_us, floor_node, step_through  # noqa: E402

import frost  # noqa: E402
from frost.lowering import FakeCompiler, clear_caches, use_compiler  # noqa: E402


class _Wrapped(torch.autograd.Function):
    """The floor's node with frost's functional calls inside: autograd's cost plus the calls', nothing else."""

    @staticmethod
    def forward(ctx, q, k, v):
        out, lse = frost.sdpa_forward(q, k, v, causal=True)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv, _ = frost.sdpa_backward(q, k, v, out, dout.contiguous(), lse, causal=True)
        return dq, dk, dv


def _steps(device: str) -> dict:
    q, k, v = (torch.randn(1, 128, 4, 64, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(1, 128, 4, 64, device=device, dtype=torch.bfloat16)

    def functional() -> None:
        out, lse = frost.sdpa_forward(q.detach(), k.detach(), v.detach(), causal=True)
        frost.sdpa_backward(q.detach(), k.detach(), v.detach(), out, dout, lse, causal=True)

    attention = step_through(lambda q, k, v: frost.attention(q, k, v, causal=True), q, k, v, dout)

    def single_threaded() -> None:
        with torch.autograd.set_multithreading_enabled(False):
            attention()

    return {"floor": step_through(floor_node, q, k, v, dout), "functional": functional,
            "wrapped": step_through(_Wrapped.apply, q, k, v, dout), "attention": attention,
            "attention-1t": single_threaded}


def _with_replay(on: bool) -> None:
    """Replay is decided when a launch is bound: set the switch and rebuild the plans."""
    os.environ["FROST_GRAPH_REPLAY"] = "1" if on else "0"
    clear_caches()


def measure(device: str, calls: int, rounds: int) -> dict[str, float]:
    steps = _steps(device)
    samples: dict[str, list[float]] = {name: [] for name in steps}
    replay_off = device.startswith("cuda")
    if replay_off:
        samples |= {"attention-noreplay": [], "functional-noreplay": []}
    for _ in range(rounds):
        _with_replay(True)
        for name, step in steps.items():
            samples[name].append(_per_call_us(step, calls))
        if replay_off:
            _with_replay(False)
            for name in ("attention", "functional"):
                samples[f"{name}-noreplay"].append(_per_call_us(steps[name], calls))
    _with_replay(True)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    on_cpu = args.device == "cpu"
    compiler = FakeCompiler(device_type="cpu", persist=False, record=False) if on_cpu else None
    with use_compiler("cute_sm120", compiler) if compiler else nullcontext(), _calls_target(args.device, "sm_120"):
        result = measure(args.device, args.calls, args.rounds)
    kernels = "no-op kernels" if on_cpu else "real kernels"
    print(f"host time per forward + backward step, {args.device}, {kernels}, median of {args.rounds} rounds:")
    for name, us in result.items():
        print(f"  {name:20s} {us:8.1f} us")


if __name__ == "__main__":
    main()
