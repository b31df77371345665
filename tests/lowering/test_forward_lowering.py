"""The forward's lowering: the cute_sm120 forward's plan through the fake compiler (no workspace, one launch, a
compile key without feature flags, the kernel and disk caches), its length checks, the reference engine's forward,
and graphs holding a forward and its backward (run in dataflow order)."""

from __future__ import annotations

import pytest
import torch

import frost.api.plans as api
from frost.errors import TensorError
from frost.ir import GraphBuilder, sdpa_forward_graph
from frost.lowering import FakeCompiler, cache_stats, clear_caches, use_compiler
from frost.reference import attention_backward, attention_forward
from frost.spec import Mask
from helpers.graph_inputs import graph_inputs


def _inputs(graph, seed: int = 0, short: int = 5) -> dict:
    """Random inputs for every tensor no op writes; lengths hold [S, ..., S, S - short]."""
    def lengths(spec):
        full = graph.tensor("q" if spec.name == "seq_len_q" else "k").shape[2]
        return [full] * (spec.shape[0] - 1) + [full - short]

    return graph_inputs(graph, seed=seed, lengths=lengths)


def _forward(**kw):
    args = dict(heads_kv=2, sink=True, padded=True, causal=True, band_left=7, alignment="bottom_right")
    return sdpa_forward_graph(2, 4, 24, 64, seq_kv=40, **(args | kw))


def test_the_kernel_plan_launches_the_forward_once_without_workspace():
    graph = _forward()
    with use_compiler("cute_sm120", FakeCompiler(persist=False)) as compiler:
        plan = api.compile(graph, target="sm_120")
        assert plan.engine == "cute_sm120" and plan.workspace_size == 0
        (launch,) = plan.kernels
        assert launch.name == "attn/forward" and launch.grid[1:] == (4, 2)
        inputs = _inputs(graph)
        outs = plan.new_outputs()
        plan.execute(inputs | outs)
    (kernel,) = compiler.kernels
    ((call, options),) = kernel.launches
    want = (inputs["q"], inputs["k"], inputs["v"], outs["attn.o"], outs["attn.lse"])
    assert all(a is b for a, b in zip((call.q, call.k, call.v, call.o, call.lse), want))
    assert call.optional["sink"] is inputs["sink"] and call.optional["seq_len_kv"] is inputs["seq_len_kv"]
    assert options["stream"] is None
    ((scale, mask),) = kernel.problems      # bound once, at lowering
    assert mask == Mask(7, 0, "bottom_right") and scale == pytest.approx(64 ** -0.5)


def test_features_and_shapes_share_one_kernel():
    """GQA, padding, the sink, the mask and the sizes are runtime values of the forward kernel: one compile."""
    graphs = [_forward(), _forward(sink=False, padded=False, causal=False, band_left=None, alignment="top_left"),
              sdpa_forward_graph(3, 8, 100, 64, seq_kv=7, heads_kv=8)]
    with use_compiler("cute_sm120", FakeCompiler()) as compiler:
        keys = {api.compile(g, target="sm_120").compile_keys for g in graphs}
    assert len(keys) == 1 and len(compiler.compiled) == 1
    assert "sink" not in next(iter(keys))[0] and "gqa" not in next(iter(keys))[0]


def test_the_dtype_and_head_dims_change_the_key():
    with use_compiler("cute_sm120", FakeCompiler()) as compiler:
        keys = {api.compile(g, target="sm_120").compile_keys for g in
                (_forward(), _forward(dtype="float16"), sdpa_forward_graph(1, 2, 8, 128),
                 sdpa_forward_graph(1, 2, 8, 192, head_dim_v=128))}
    assert len(keys) == 4 and len(compiler.compiled) == 4


def test_the_kernel_persists_on_disk():
    with use_compiler("cute_sm120", FakeCompiler()) as first:
        api.compile(_forward(), target="sm_120")
    assert first.compiled and cache_stats().disk_writes == 1
    clear_caches()
    with use_compiler("cute_sm120", FakeCompiler()) as second:
        api.compile(_forward(), target="sm_120")
    assert second.compiled == [] and cache_stats().disk_hits == 1


def test_bad_lengths_are_refused_before_the_launch(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    graph = _forward()
    inputs = _inputs(graph)
    inputs["seq_len_q"][0] = 1000
    with use_compiler("cute_sm120", FakeCompiler(persist=False)) as compiler:
        plan = api.compile(graph, target="sm_120")
        with pytest.raises(TensorError, match="seq_len_q"):
            plan.execute(inputs)
        assert not compiler.kernels[0].launches
        monkeypatch.setenv("FROST_CHECK_SEQ_LENS", "0")
        plan.execute(inputs)
        assert len(compiler.kernels[0].launches) == 1


def test_the_reference_forward_is_the_reference():
    graph = _forward(dtype="float32", band_right=3)
    plan = api.compile(graph, target="cpu")
    assert plan.engine == "reference" and plan.kernels[0].compile_key.startswith("reference|forward|")
    inputs = _inputs(graph)
    res = plan.execute(inputs)
    o, lse = attention_forward(inputs["q"], inputs["k"], inputs["v"], causal=True, alignment="bottom_right",
                               band_left=7, band_right=3, sink=inputs["sink"], seq_len_q=inputs["seq_len_q"],
                               seq_len_kv=inputs["seq_len_kv"])
    assert torch.equal(res["attn.o"], o) and torch.equal(res["attn.lse"], lse)


def _layer(reverse: bool, dtype: str = "float32"):
    b = GraphBuilder("layer")
    q = b.tensor("q", (2, 4, 24, 64), dtype, layout="bshd")
    k = b.tensor("k", (2, 2, 40, 64), dtype, layout="bshd")
    v = b.tensor("v", (2, 2, 40, 64), dtype, layout="bshd")
    do = b.tensor("do", (2, 4, 24, 64), dtype, layout="bshd")
    sink = b.tensor("sink", (4,), "float32")
    lens = dict(seq_len_q=b.tensor("seq_len_q", (2,), "int32"), seq_len_kv=b.tensor("seq_len_kv", (2,), "int32"))
    fwd = b.sdpa_forward(q, k, v, sink=sink, causal=True, name="fwd", **lens)
    b.sdpa_backward(q, k, v, fwd.o, do, fwd.lse, sink=sink, causal=True, name="bwd", **lens)
    if reverse:
        b._ops.reverse()
    return b.build()


@pytest.mark.parametrize("reverse", [False, True])
def test_a_forward_and_its_backward_run_in_one_plan(reverse):
    graph = _layer(reverse)
    plan = api.compile(graph, target="cpu")
    assert plan.engines == {"fwd": "reference", "bwd": "reference"}
    assert [op.op_name for op in plan.ops] == ["fwd", "bwd"]
    inputs = _inputs(graph)
    res = plan.execute(inputs)
    lens = {n: inputs[n] for n in ("seq_len_q", "seq_len_kv")}
    o, lse = attention_forward(inputs["q"], inputs["k"], inputs["v"], causal=True, sink=inputs["sink"], **lens)
    grads = attention_backward(inputs["q"], inputs["k"], inputs["v"], o, inputs["do"], lse, causal=True,
                               sink=inputs["sink"], **lens)
    assert torch.equal(res["fwd.o"], o) and torch.equal(res["fwd.lse"], lse)
    for name, want in zip(("dq", "dk", "dv", "dsink"), grads):
        assert torch.equal(res[f"bwd.{name}"], want.to(res[f"bwd.{name}"].dtype))


def test_a_forward_and_its_backward_on_the_kernel_engine():
    graph = _layer(reverse=True, dtype="bfloat16")
    with use_compiler("cute_sm120", FakeCompiler(persist=False)) as compiler:
        plan = api.compile(graph, target="sm_120")
        assert plan.engines == {"fwd": "cute_sm120", "bwd": "cute_sm120"}
        assert [k.name for k in plan.kernels] == ["fwd/forward", "bwd/backward"]
        plan.execute(_inputs(graph), workspace=plan.new_workspace())
    assert [len(k.launches) for k in compiler.kernels] == [1, 1]
