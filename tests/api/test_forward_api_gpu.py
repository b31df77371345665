"""frost.sdpa_forward and frost.attention on the GPU machine (pytest -m gpu): the plan runs the cute_sm120 forward
(fp32 falls back to the reference engine), O and LSE meet the FA rule against the fp64 oracle, forward + frost
backward through autograd meet it against torch autograd of the fp64 oracle, the graph path allocates nothing
and captures in a CUDA graph, and the forward kernel loads from the disk cache in a new process.

FA rule (tests/helpers/fa_rule.py): max|frost - oracle| <= 2 * max|lowp_reference - oracle| + FLOOR *
max|oracle| + NOISE * scale, with the oracle tests/helpers/oracle.py (or autograd through it) in fp64 on the exact
inputs and lowp_reference frost.reference in the io dtype. Entries the oracle gives as -inf must be exactly -inf.

Run: python3 -m pytest -m gpu tests/api/test_forward_api_gpu.py"""

from __future__ import annotations

import math
import textwrap

import pytest
import torch

import frost
from frost import reference
from frost.lowering.plan_cache import PLANS
from helpers import oracle, oracle_api
from helpers.fa_rule import assert_fa_rule, padded_rows_zero
from helpers.graph_inputs import empty_for
from helpers.processes import run_twice
from helpers.tensors import int32, randn_bshd

pytestmark = pytest.mark.gpu


def _engines() -> set[str]:
    """The engines of every plan built since the test began (tests/api/conftest.py empties the caches)."""
    return {plan.engine for plan in PLANS._items.values()}


def check_forward(dtype, b, hq, hkv, sq, skv, d, dv=None, *, lens_q=None, lens_kv=None, sink=None, engine="cute_sm120",
                  causal=False, alignment="top_left", band_left=None, band_right=None, seed=0):
    """frost.sdpa_forward on one problem: the plan's engine, then O and LSE under the FA rule."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (randn_bshd(b, s, h, dim, dtype, gen=gen, device="cuda")
               for s, h, dim in ((sq, hq, d), (skv, hkv, d), (skv, hkv, dv or d)))
    side = dict(seq_len_q=int32(lens_q, "cuda"), seq_len_kv=int32(lens_kv, "cuda"),
                sink=None if sink is None else torch.tensor(sink, dtype=torch.float32, device="cuda"))
    out, lse = frost.sdpa_forward(q, k, v, causal=causal, causal_alignment=alignment,
                                  window_size=(band_left, band_right), **side)
    torch.cuda.synchronize()
    assert _engines() == {engine}
    mask = dict(scale=1 / math.sqrt(d), causal=causal, alignment=alignment, band_left=band_left, band_right=band_right,
                seq_len_q=side["seq_len_q"], seq_len_kv=side["seq_len_kv"])
    bhsd = [t.transpose(1, 2) for t in (q, k, v)]
    o64, lse64 = oracle.attention_forward(*bhsd, sink=side["sink"], **mask)
    o_lp, lse_lp = reference.attention_forward(*bhsd, sink=side["sink"], **mask)
    report = [assert_fa_rule("o", out.transpose(1, 2), o64, o_lp), assert_fa_rule("lse", lse, lse64, lse_lp)]
    failed = []
    padded_rows_zero("o", out.transpose(1, 2), lens_q, failed)
    assert not failed, failed
    return out, lse, report


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gqa_sink_window_padding(dtype):
    print(check_forward(dtype, 2, 8, 2, 300, 300, 64, lens_q=[300, 177], lens_kv=[300, 250],
                        sink=[30.0, -30.0, 0.5, -2.0] * 2, causal=True, alignment="bottom_right", band_left=100)[2])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_d128_causal(dtype):
    print(check_forward(dtype, 2, 4, 4, 513, 513, 128, causal=True, seed=1)[2])


def test_mla_head_dims_with_sq_not_skv():
    print(check_forward(torch.bfloat16, 1, 4, 1, 200, 333, 192, 128, causal=True, alignment="bottom_right",
                        lens_kv=[300], sink=[1.5] * 4, seed=2)[2])


def test_float32_falls_back_to_the_reference_engine():
    out, lse, _ = check_forward(torch.float32, 1, 4, 2, 77, 90, 64, causal=True, engine="reference", seed=3)
    assert out.dtype == torch.float32 and lse.dtype == torch.float32


def test_attention_runs_the_kernels_both_ways_and_matches_sdpa_forward():
    gen = torch.Generator(device="cuda").manual_seed(4)
    q, k, v = (randn_bshd(2, 300, h, 64, torch.bfloat16, gen=gen, device="cuda") for h in (8, 2, 2))
    sink = torch.randn(8, device="cuda")
    leaves = [t.clone().requires_grad_() for t in (q, k, v, sink)]
    out = frost.attention(*leaves[:3], causal=True, window_size=(128, None), sink=leaves[3])
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    assert _engines() == {"cute_sm120"} and len(PLANS) == 2      # the forward's plan and the backward's
    again, _ = frost.sdpa_forward(q, k, v, causal=True, window_size=(128, None), sink=sink)
    assert torch.equal(out.detach(), again)
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in leaves)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("left", [None, 128])
def test_forward_and_backward_through_autograd(dtype, left):
    """gpt-oss-like (GQA 8:1, causal bottom-right, sink, padding, with and without a 128-token window): frost's
    gradients of q, k, v and the sink against torch autograd through the fp64 oracle."""
    b, hq, hkv, s, d = 2, 16, 2, 257, 64
    gen = torch.Generator(device="cuda").manual_seed(5)
    q, k, v, dout = (randn_bshd(b, s, h, d, dtype, gen=gen, device="cuda") for h in (hq, hkv, hkv, hq))
    sink = torch.randn(hq, generator=gen, device="cuda") * 4
    lens = int32([s, 200], "cuda")
    leaves = [t.clone().requires_grad_() for t in (q, k, v, sink)]
    out = frost.attention(*leaves[:3], causal=True, causal_alignment="bottom_right", window_size=(left, None),
                          sink=leaves[3], seq_len_q=lens, seq_len_kv=lens)
    out.backward(dout)
    torch.cuda.synchronize()
    assert _engines() == {"cute_sm120"}

    exact = [t.detach().cpu().double().requires_grad_() for t in (q, k, v, sink)]   # the oracle runs on the CPU
    options = dict(causal=True, causal_alignment="bottom_right", window_size=(left, None))
    oracle_api.attention(*exact[:3], sink=exact[3], seq_len_q=lens, seq_len_kv=lens, **options).backward(
        dout.cpu().double())
    mask = dict(causal=True, alignment="bottom_right", band_left=left, seq_len_q=lens, seq_len_kv=lens)
    bhsd = [t.transpose(1, 2) for t in (q, k, v)]
    o_lp, lse_lp = reference.attention_forward(*bhsd, sink=sink, **mask)
    low = reference.attention_backward(*bhsd, o_lp, dout.transpose(1, 2), lse_lp, sink=sink, **mask)
    low = [g.transpose(1, 2) for g in low[:3]] + [low[3]]
    scale = max(e.grad.abs().max().item() for e in exact[:3])
    report = [assert_fa_rule(name, leaf.grad, e.grad, lo, noise_scale=scale)
              for name, leaf, e, lo in zip(("dq", "dk", "dv", "dsink"), leaves, exact, low)]
    print(report)


def test_graph_path_allocates_nothing_and_captures_in_a_cuda_graph():
    graph = frost.sdpa_forward_graph(2, 8, 300, 128, heads_kv=2, sink=True, causal=True, band_left=64)
    plan = frost.compile(graph)
    assert plan.engine == "cute_sm120" and plan.workspace_size == 0
    gen = torch.Generator(device="cuda").manual_seed(6)
    inputs = {s.name: _with_strides(s, torch.randn(s.shape, generator=gen, device="cuda"))
              for s in graph.tensors if not s.name.startswith("attn.")}
    outs = plan.new_outputs("cuda")
    plan.execute(inputs | outs)
    torch.cuda.synchronize()
    first = {n: t.clone() for n, t in outs.items()}
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    plan.execute(inputs | outs)
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
    cuda_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cuda_graph):
        plan.execute(inputs | outs)
    for t in outs.values():
        t.fill_(float("nan"))
    cuda_graph.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(outs[n], first[n]) for n in outs)


def _with_strides(spec, values):
    """`values` in the spec's dtype and strides."""
    return empty_for(spec, "cuda").copy_(values)


CHILD = textwrap.dedent("""
    import json, time, torch, frost
    from frost.lowering import cache_stats
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 200, h, 64, device="cuda", dtype=torch.bfloat16) for h in (8, 2, 2))
    start = time.perf_counter()
    out, lse = frost.sdpa_forward(q, k, v, causal=True, sink=torch.zeros(8, device="cuda"))
    torch.cuda.synchronize()
    print(json.dumps(cache_stats().as_dict() | {"seconds": time.perf_counter() - start,
                                                "out": out.double().sum().item(), "lse": lse.sum().item()}))
""")


def test_the_forward_kernel_loads_from_the_disk_cache_in_a_new_process(tmp_path):
    runs = run_twice(CHILD, tmp_path / "cache")
    print(runs)
    assert runs[0]["compiles"] == 1 and runs[0]["disk_writes"] == 1
    assert runs[1]["compiles"] == 0 and runs[1]["disk_hits"] == 1
    assert (runs[1]["out"], runs[1]["lse"]) == (runs[0]["out"], runs[0]["lse"])
