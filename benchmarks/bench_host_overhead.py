"""Host overhead of `plan.execute` on a plan-cache hit, kernels excluded (target: <= 20 us per call).

What is measured: the cute_sm120 engine's whole host path per call -- checking every tensor against the plan
(dtype, shape, strides, device, 16-byte pointers), checking and carving the caller's workspace, and calling the
launcher -- with a no-op kernel behind the compiler seam (frost.lowering.FakeCompiler). Outputs and workspace are
passed in, so the call allocates nothing. What is not: the kernels' own host work (CuTe argument marshalling and
the CUDA launches, measured by the kernel benchmarks) and GPU time. With --real on a GPU the real CuteCompiler is
used instead, so the number then includes the bound launch (one TVM-FFI call that launches the three kernels,
or from the second call with the same tensors one CUDA-graph launch of them: kernels.graph_replay; host time only:
calls run in bursts with an untimed synchronisation in between), and three parts are timed alone: the bound launch
(frost.kernels.backward.launch.Launch) with graph replay and without, and the checked public entry
(CompiledBackward.__call__, which keeps a bound launch per problem, so repeated calls replay too).
FROST_GRAPH_REPLAY=0 times plan.execute without replay. Also timed, on either device (on a CPU through the same
no-op kernels): frost.sdpa_backward (the functional call: BSHD tensors, allocates its outputs and workspace), and
frost.attention forward + autograd backward beside a torch.autograd.Function that computes nothing (the cost of a
Python autograd node, which torch's own attention ops do not pay).

    python benchmarks/bench_host_overhead.py [--device cpu|cuda] [--calls 20000] [--real [--busy]]
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import contextmanager, nullcontext

import torch

import frost.api.plans as api
from frost.ir import sdpa_backward_graph
from frost.lowering import FakeCompiler, cache_stats, use_compiler


def _inputs(plan, device) -> dict:
    op = plan.graph.sdpa_ops()[0]
    tensors = {s.name: torch.empty_strided(s.shape, s.effective_strides, dtype=getattr(torch, s.dtype), device=device)
               for s in plan.graph.tensors if s.name not in op.output_names()}
    return tensors | plan.new_outputs(device)


BURST = 200  # calls between (untimed) synchronisations on a GPU: 600 launches stay below CUDA's launch queue depth


BUSY_CYCLES = 50_000_000  # a sleep kernel (~25 ms) that outlasts a burst: every launch of the burst stays pending


def _per_call_us(fn, calls: int, repeats: int = 7, busy: bool = False) -> float:
    """Median host time per call. On a GPU the calls run in bursts with a synchronisation (not timed) before each,
    so a full launch queue never makes the host wait for the GPU. ``busy``: a sleep kernel is queued before each
    burst, so every call of the burst is enqueued behind work still running (as in a training loop, where the host
    runs ahead of the GPU) instead of onto an idle GPU."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else None
    burst = BURST if sync else calls
    for _ in range(calls // 10):
        fn()
    samples = []
    for _ in range(repeats):
        total = 0.0
        for done in range(0, calls, burst):
            if sync:
                sync()
                if busy:
                    torch.cuda._sleep(BUSY_CYCLES)
            start = time.perf_counter()
            for _ in range(min(burst, calls - done)):
                fn()
            total += time.perf_counter() - start
        samples.append(total / calls * 1e6)
    return statistics.median(samples)


def measure(device: str = "cpu", calls: int = 20000, real: bool = False, busy: bool = False) -> dict[str, float]:
    graph = sdpa_backward_graph(1, 4, 128, 64, dtype="bfloat16", causal=True)
    target = "sm_90" if real else "sm_120"
    if real:
        from frost.api.plans import target_of
        target = target_of(torch.device(device))
    compiler = None if real else FakeCompiler(device_type=torch.device(device).type, persist=False, record=False)
    with use_compiler("cute_sm120", compiler) if compiler else nullcontext(), _calls_target(device, target):
        plan = api.compile(graph, target=target)
        tensors, workspace = _inputs(plan, device), plan.new_workspace(device)
        execute = _per_call_us(lambda: plan.execute(tensors, workspace=workspace), calls)
        recompile = _per_call_us(lambda: api.compile(graph, target=target), max(calls // 10, 100))
        functional = _functional_us(device, calls)
        parts = _autograd_us(device, calls // 4)
        parts |= _kernel_entry_us(tensors, device, calls) if real else {}
        if real and busy:
            parts |= {f"busy_{name}": us for name, us in _kernel_entry_us(tensors, device, calls, busy=True).items()}
            parts["busy_functional_us"] = _functional_us(device, calls, busy=True)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return {"execute_us": execute, "compile_hit_us": recompile, "functional_us": functional, "engine": plan.engine,
            "kernels_compiled": cache_stats().compiles} | parts


def _kernel_entry_us(tensors: dict, device: str, calls: int, busy: bool = False) -> dict[str, float]:
    """The real kernels' two entries alone: a Launch bound to the plan's problem, and the checked public call."""
    from frost.kernels import choose_config, compile_backward, detect_arch, workspace_regions
    from frost.kernels.backward.launch import BackwardTensors, Launch, Problem

    q, k, v, o, do, lse = (tensors[n] for n in ("q", "k", "v", "o", "do", "lse"))
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    (b, h, sq, d), skv = q.shape, k.shape[2]
    cfg = choose_config("bfloat16", d, d, True, "top_left", detect_arch())
    bwd = compile_backward(cfg)
    ws = {n: torch.empty(max(nb, 16), dtype=torch.uint8, device=device)
          for n, nb in workspace_regions(cfg, b, h, sq, skv)}
    problem = Problem(b, h, k.shape[1], sq, skv, d ** -0.5, cfg.mask())
    launch, direct = bwd.bind(problem), Launch(bwd.kernels, cfg, problem, graph_replay=False)
    args = (q, k, v, o, do, lse, dq, dk, dv)
    # (each call gathers its tensors into one BackwardTensors, as the engine's calls do)
    return {"launch_us": _per_call_us(lambda: launch(BackwardTensors(*args, ws)), calls, busy=busy),
            "launch_direct_us": _per_call_us(lambda: direct(BackwardTensors(*args, ws)), calls, busy=busy),
            "checked_call_us": _per_call_us(lambda: bwd(*args, scale=d ** -0.5, workspace=ws), calls, busy=busy)}


def _functional_us(device: str, calls: int, busy: bool = False) -> float:
    """frost.sdpa_backward on BSHD tensors: key from tensor metadata, plan hit, output allocation, execute."""
    from frost.api.functional import sdpa_backward

    q, k, v, out, dout = (torch.randn(1, 128, 4, 64, device=device, dtype=torch.bfloat16) for _ in range(5))
    lse = torch.randn(1, 4, 128, device=device)
    return _per_call_us(lambda: sdpa_backward(q, k, v, out, dout, lse, causal=True), calls, busy=busy)


def _autograd_us(device: str, calls: int) -> dict[str, float]:
    """frost.attention forward + autograd backward (the leaves' gradients dropped after each, so none accumulates),
    its forward alone, and the floor under it: a torch.autograd.Function on the same tensors that only allocates its
    outputs and gradients (torch's own cost of a Python autograd node)."""
    import frost

    q, k, v = (torch.randn(1, 128, 4, 64, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(1, 128, 4, 64, device=device, dtype=torch.bfloat16)
    frost_attention = lambda q, k, v: frost.attention(q, k, v, causal=True)   # noqa: E731
    return {"attention_step_us": _per_call_us(step_through(frost_attention, q, k, v, dout), calls),
            "attention_forward_us": _per_call_us(lambda: frost_attention(q, k, v), calls),
            "autograd_floor_us": _per_call_us(step_through(floor_node, q, k, v, dout), calls)}


def step_through(node, q, k, v, dout):
    """One training step through ``node(q, k, v) -> out``: forward, backward from ``dout``, the leaves' gradients
    dropped (so none accumulates from step to step)."""
    def step() -> None:
        node(q, k, v).backward(dout)
        q.grad = k.grad = v.grad = None
    return step


def floor_node(q, k, v):
    """_Floor's output: an attention-shaped autograd node that computes nothing."""
    return _Floor.apply(q, k, v)[0]


class _Floor(torch.autograd.Function):
    """An attention-shaped autograd node that computes nothing: (out, lse) forward, (dq, dk, dv) backward."""

    @staticmethod
    def forward(ctx, q, k, v):
        out, lse = torch.empty_like(q), q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, _, _ = ctx.saved_tensors
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


@contextmanager
def _calls_target(device: str, target: str):
    """The functional and autograd calls on CPU tensors plan for ``target`` (the fake kernels' engine), as the plan
    above does; on a GPU they plan for the device's own target."""
    from frost.api import plans

    dev = torch.device(device)
    if dev.type != "cpu":
        yield
        return
    saved = plans._targets.get(dev)
    plans._targets[dev] = target
    try:
        yield
    finally:
        plans._targets.pop(dev, None)
        if saved is not None:
            plans._targets[dev] = saved


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--real", action="store_true", help="real CuTe kernels (GPU only): includes their host work")
    p.add_argument("--busy", action="store_true",
                   help="with --real: also time the kernel entries and frost.sdpa_backward with the GPU kept busy "
                        "(every call enqueued behind a running sleep kernel)")
    args = p.parse_args()
    r = measure(args.device, args.calls, args.real, args.busy)
    what = "real kernels' host work included" if args.real else "no-op kernels"
    print(f"plan.execute, plan-cache hit, {what}, {args.device}, 9 tensors + workspace: "
          f"{r['execute_us']:.2f} us/call (target <= 20 us)")
    print(f"frost.compile on a plan-cache hit (same graph object): {r['compile_hit_us']:.2f} us/call")
    print(f"frost.sdpa_backward (functional, allocates its outputs): {r['functional_us']:.2f} us/call")
    print(f"frost.attention forward + backward: {r['attention_step_us']:.2f} us/call (its forward alone "
          f"{r['attention_forward_us']:.2f}); a torch.autograd.Function that computes nothing: "
          f"{r['autograd_floor_us']:.2f} us/call")
    print(f"engine {r['engine']}, kernels compiled {r['kernels_compiled']}")
    if "launch_us" in r:
        from frost.kernels.graph_replay import replay_enabled

        replay = "graph replay" if replay_enabled() else "FROST_GRAPH_REPLAY=0: no replay"
        print(f"timed alone: the bound launch {r['launch_us']:.2f} us/call ({replay}), "
              f"{r['launch_direct_us']:.2f} us/call (3 kernel launches); the checked public entry "
              f"CompiledBackward.__call__ {r['checked_call_us']:.2f} us/call")
    if "busy_launch_us" in r:
        print(f"GPU kept busy: the bound launch {r['busy_launch_us']:.2f} us/call (graph replay), "
              f"{r['busy_launch_direct_us']:.2f} us/call (3 kernel launches); CompiledBackward.__call__ "
              f"{r['busy_checked_call_us']:.2f} us/call; frost.sdpa_backward {r['busy_functional_us']:.2f} us/call")


if __name__ == "__main__":
    main()
