"""The cute_sm120 engine for real, on the GPU machine (pytest -m gpu): results under the FA rule against the fp64
oracle, no allocation and CUDA-graph capture with caller-owned memory, and the CuTe disk cache across processes."""

import textwrap

import pytest
import torch

import frost.api.plans as api
from frost.ir import sdpa_backward_graph
from helpers import oracle
from helpers.fa_rule import fa_rule_each
from helpers.processes import run_twice
from lowering_helpers import inputs_for

pytestmark = pytest.mark.gpu
GRADS = ("dq", "dk", "dv")


def _graph():
    return sdpa_backward_graph(2, 4, 200, 64, seq_kv=250, dtype="bfloat16", causal=True, alignment="bottom_right")


def _backward(engine, t: dict) -> tuple:
    """engine.attention_backward (the oracle's in fp64, or frost.reference's in bf16) on the graph's inputs."""
    return engine.attention_backward(t["q"], t["k"], t["v"], t["o"], t["do"], t["lse"], causal=True,
                                     alignment="bottom_right")


def check_fa_rule(t: dict, got: dict) -> list:
    """Kernel error <= 2x the low-precision reference's error + a small floor (FLOOR, no noise term), per
    gradient."""
    from frost import reference

    exact, low = _backward(oracle, t), _backward(reference, t)
    failed, report = [], []
    fa_rule_each(GRADS, [got[f"attn.{name}"] for name in GRADS], exact[:3], low[:3], failed, report, noise_scale=0.0)
    assert not failed, (failed, report)
    return report


def test_cute_engine_runs_and_meets_the_fa_rule():
    plan = api.compile(_graph())
    assert plan.engine == "cute_sm120", plan.report.to_text()
    t = inputs_for(plan.graph, device="cuda")
    outs, ws = plan.new_outputs("cuda"), plan.new_workspace("cuda")
    plan.execute(t | outs, workspace=ws)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    plan.execute(t | outs, workspace=ws)
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before   # caller-owned memory: no allocation
    print(check_fa_rule(t, outs))


def test_cuda_graph_capture():
    plan = api.compile(_graph())
    t = inputs_for(plan.graph, device="cuda")
    outs, ws = plan.new_outputs("cuda"), plan.new_workspace("cuda")
    plan.execute(t | outs, workspace=ws)                      # warm: compile and bind outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.execute(t | outs, workspace=ws)
    for o in outs.values():
        o.zero_()
    graph.replay()
    torch.cuda.synchronize()
    check_fa_rule(t, outs)


def test_functional_api_on_the_gpu():
    from frost.api.functional import sdpa_backward
    from frost.api.autograd import attention

    q, k, v = (torch.randn(2, 300, 4, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = attention(q, k, v, causal=True)
    out.sum().backward()
    dq, dk, dv, _ = sdpa_backward(q.detach(), k.detach(), v.detach(), out.detach(), torch.ones_like(out),
                                  attention(q, k, v, causal=True, return_lse=True)[1].detach(), causal=True)
    assert torch.equal(dk, k.grad) or (dk.float() - k.grad.float()).abs().max() < 5e-2


CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path[:0] = ["tests/lowering", "tests"]
    import torch
    import frost.api.plans as api
    from frost.lowering import cache_stats
    from lowering_helpers import inputs_for
    from test_gpu_cute import _graph, check_fa_rule
    start = time.perf_counter()
    plan = api.compile(_graph())
    compile_s = time.perf_counter() - start
    t = inputs_for(plan.graph, device="cuda")
    outs = plan.new_outputs("cuda")
    plan.execute(t | outs, workspace=plan.new_workspace("cuda"))
    torch.cuda.synchronize()
    try:
        fa = check_fa_rule(t, outs)
    except AssertionError as exc:
        fa = f"FAILED {exc}"
    print(json.dumps(cache_stats().as_dict() | {"engine": plan.engine, "compile_s": compile_s, "fa_rule": str(fa)}))
""")


def test_disk_cache_across_processes(tmp_path):
    runs = run_twice(CHILD, tmp_path / "cache")
    print(runs)
    assert runs[0]["engine"] == "cute_sm120" and runs[0]["compiles"] == 1 and runs[0]["disk_writes"] == 1
    assert runs[1]["compiles"] == 0 and runs[1]["disk_hits"] == 1
