"""Graphs with more than one attention op, with nodes frost does not claim, and the networkx view."""

from __future__ import annotations

import gc

import pytest

from analyzer_graphs import B, D, H, S, baseline
from frost.analyzer import PATTERNS, Pattern, analyze, analyze_with, facts_for, probe, to_networkx
from frost.errors import GraphError
from frost.ir import GraphBuilder


def two_layers_with_glue():
    """proj -> attn0 (MHA causal) ; attn1 (GQA + sink, padded) ; layer_norm and an add on the grads."""
    g = GraphBuilder("two_layers")
    x = g.tensor("x", (B, S, H * D), "bfloat16")
    w = g.tensor("w", (H * D, H * D), "bfloat16")
    io = {n: g.tensor(n, (B, H, S, D), "bfloat16", layout="bshd") for n in ("q0", "k0", "v0", "o0", "do0")}
    lse0 = g.tensor("lse0", (B, H, S), "float32")
    g.op("matmul", "proj", inputs=(x, w), outputs=(io["q0"],))
    grads0 = g.sdpa_backward(io["q0"], io["k0"], io["v0"], io["o0"], io["do0"], lse0, causal=True, name="attn0")
    kv = {n: g.tensor(n, (B, 2, S, D), "bfloat16", layout="bshd") for n in ("k1", "v1")}
    io1 = {n: g.tensor(n, (B, H, S, D), "bfloat16", layout="bshd") for n in ("q1", "o1", "do1")}
    lse1 = g.tensor("lse1", (B, H, S), "float32")
    sink = g.tensor("sink1", (H,), "float32")
    lens = g.tensor("lens1", (B,), "int32")
    g.sdpa_backward(io1["q1"], kv["k1"], kv["v1"], io1["o1"], io1["do1"], lse1, sink=sink, seq_len_q=lens,
                    seq_len_kv=lens, causal=True, name="attn1")
    out = g.tensor("ln_out", (B, H, S, D), "bfloat16")
    g.op("layer_norm", "ln", inputs=(grads0.dq,), outputs=(out,), eps=1e-5)
    g.op("add", "sum", inputs=(grads0.dk, grads0.dv), outputs=(g.tensor("kv_sum", (B, H, S, D), "bfloat16"),))
    return g.build()


def test_several_attention_ops_and_unclaimed_nodes():
    report = probe(two_layers_with_glue(), "sm_120")
    assert report.supported
    assert report.engines == {"attn0": "cute_sm120", "attn1": "cute_sm120"}  # gqa + padding + sink: served
    assert report.ops[1].declined == {}
    assert [(u.name, u.op, u.code) for u in report.unclaimed] == [
        ("proj", "matmul", "no_pattern"), ("ln", "layer_norm", "no_pattern"), ("sum", "add", "no_pattern")]
    assert "sdpa_backward" in report.unclaimed[0].message
    text = report.to_text()
    assert "unclaimed" in text and "'ln' (layer_norm)" in text


def test_graph_with_nothing_to_claim_is_unsupported_not_an_error():
    g = GraphBuilder("glue")
    a = g.tensor("a", (4, 4), "float32")
    g.op("relu", "r", inputs=(a,), outputs=(g.tensor("b", (4, 4), "float32"),))
    report = probe(g.build(), "cpu")
    assert not report.supported and report.ops == () and len(report.unclaimed) == 1
    assert "claims no op" in report.to_text()


def test_networkx_view_has_tensor_and_op_nodes_with_roles():
    graph = baseline(sink=True, padded=True)
    g = to_networkx(graph)
    assert g.number_of_nodes() == len(graph.tensors) + len(graph.ops)
    op = ("op", "attn")
    assert {src[1]: d["roles"] for src, _, d in g.in_edges(op, data=True)}["lse"] == ("lse",)
    assert sorted(r for _, _, d in g.out_edges(op, data=True) for r in d["roles"]) == ["dk", "dq", "dsink", "dv"]
    assert to_networkx(graph) is g  # memoised per graph object


def test_memo_entries_leave_with_their_graph():
    before = to_networkx.cache_size()
    graph = baseline()
    to_networkx(graph)
    analyze(graph)
    assert to_networkx.cache_size() == before + 1
    del graph
    gc.collect()
    assert to_networkx.cache_size() == before


def test_one_tensor_in_two_roles_is_still_claimed():
    g = GraphBuilder("shared_qk")
    t = {n: g.tensor(n, (B, H, S, D), "float16") for n in ("qk", "v", "o", "do")}
    lse = g.tensor("lse", (B, H, S), "float32")
    g.sdpa_backward(t["qk"], t["qk"], t["v"], t["o"], t["do"], lse, name="attn")
    (m,) = analyze(g.build()).matched
    assert m.binding.reads["q"] == m.binding.reads["k"] == "qk"


def test_a_dataflow_cycle_is_a_graph_error():
    g = GraphBuilder("cycle")
    t = {n: g.tensor(n, (B, H, S, D), "float16") for n in ("q", "k", "v", "o", "do")}
    lse = g.tensor("lse", (B, H, S), "float32")
    grads = g.sdpa_backward(t["q"], t["k"], t["v"], t["o"], t["do"], lse, name="attn")
    g.op("update", "feedback", inputs=(grads.dq,), outputs=(t["q"],))
    with pytest.raises(GraphError, match="acyclic"):
        probe(g.build(), "cpu")


def _glue_graph():
    g = GraphBuilder("glue")
    a, b = g.tensor("a", (4, 4), "float32"), g.tensor("b", (4, 4), "float32")
    g.op("layer_norm", "ln", inputs=(a,), outputs=(g.tensor("c", (4, 4), "float32"),))
    g.op("matmul", "mm", inputs=(a, b), outputs=(g.tensor("d", (4, 4), "float32"),))
    return g.build()


def test_a_new_pattern_is_a_new_entry():
    ln = Pattern(op="layer_norm", needs=("0",), emits=("0",), describe=lambda graph, op: f"facts of {op.name}")
    mm = Pattern(op="matmul", needs=("a", "b"), emits=("out",))
    analysis = analyze_with(_glue_graph(), PATTERNS + (ln, mm))
    assert [(m.name, m.pattern.label, m.facts) for m in analysis.matched] == [("ln", "layer_norm", "facts of ln")]
    (unclaimed,) = analysis.unclaimed
    assert unclaimed.code == "pattern_mismatch"
    assert "missing input roles ['a', 'b']" in unclaimed.message
    assert "unexpected input roles ['0', '1']" in unclaimed.message


def test_pattern_predicate_can_refuse():
    picky = Pattern(op="layer_norm", needs=("0",), emits=("0",), where=lambda b: "needs an affine weight")
    (unclaimed, _) = analyze_with(_glue_graph(), (picky,)).unclaimed
    assert (unclaimed.code, unclaimed.message) == ("pattern_mismatch", "layer_norm: needs an affine weight")


def test_facts_for_takes_an_op_or_its_name():
    graph = baseline()
    assert facts_for(graph, "attn") == facts_for(graph, graph.ops[0])
    with pytest.raises(TypeError):
        facts_for(_glue_graph(), "ln")
