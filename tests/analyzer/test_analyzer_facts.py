"""Facts describe with plain values only, and say what the strides say."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer_graphs import B, D, H, S, baseline, custom, gpt_oss, permuted_strides
from frost.analyzer import Facts, facts_for, probe
from frost.ir import GraphBuilder, sdpa_backward_graph
from frost.spec import Mask

PLAIN = (str, int, float, bool, type(None))


def assert_plain(facts: Facts) -> None:
    """Plain values, or frost.spec's Mask of plain values."""
    for name in Facts.model_fields:
        value = getattr(facts, name)
        parts = dataclasses.astuple(value) if isinstance(value, Mask) else (value,)
        assert all(type(v) in PLAIN for v in parts), f"{name} holds {value!r}"


def test_gpt_oss_facts():
    f = facts_for(gpt_oss(), "attn")
    assert_plain(f)
    assert (f.dtype, f.batch, f.heads_q, f.heads_kv, f.gqa_group) == ("bfloat16", 2, 64, 8, 8)
    assert f.mask == Mask(128, 0, "bottom_right") and f.mask.kind == "band"
    assert f.has_padding_q and f.has_padding_kv and f.has_sink and not f.deterministic
    assert (f.layout, f.head_dim_contiguous, f.strides_16b_aligned, f.lse_contiguous) == ("bshd", True, True, True)
    assert f.attn_scale == 1 / math.sqrt(64) and not f.needs_int64_offsets
    assert len(Facts.model_fields) <= 30


def test_layouts():
    assert facts_for(baseline(layout="bhsd"), "attn").layout == "bhsd"
    assert facts_for(baseline(layout="bshd"), "attn").layout == "bshd"
    odd = facts_for(custom(strides=lambda s: permuted_strides(s, (0, 2, 3, 1))), "attn")
    assert (odd.layout, odd.head_dim_contiguous) == ("strided", False)


def test_single_head_is_both_layouts_and_reads_as_bshd():
    assert facts_for(sdpa_backward_graph(2, 1, 128, 64, layout="bhsd"), "attn").layout == "bshd"


def test_mixed_layouts_are_strided():
    g = GraphBuilder("mixed")
    q = g.tensor("q", (B, H, S, D), "float16", layout="bhsd")
    rest = {n: g.tensor(n, (B, H, S, D), "float16", layout="bshd") for n in ("k", "v", "o", "do")}
    lse = g.tensor("lse", (B, H, S), "float32")
    g.sdpa_backward(q, rest["k"], rest["v"], rest["o"], rest["do"], lse, name="attn")
    f = facts_for(g.build(), "attn")
    assert (f.layout, f.head_dim_contiguous, f.strides_16b_aligned) == ("strided", True, True)


def test_large_tensors_need_int64_offsets():
    f = facts_for(sdpa_backward_graph(1, 16, 2**17, 1024, dtype="float16"), "attn")
    assert f.needs_int64_offsets


def test_explicit_scale_is_kept_and_lse_stride_is_read():
    g = GraphBuilder("scaled")
    t = {n: g.tensor(n, (B, H, S, D), "float16") for n in ("q", "k", "v", "o", "do")}
    lse = g.tensor("lse", (B, H, S), "float32", strides=(1, B, B * H))   # S outermost in memory
    g.sdpa_backward(t["q"], t["k"], t["v"], t["o"], t["do"], lse, attn_scale=0.5, name="attn")
    f = facts_for(g.build(), "attn")
    assert f.attn_scale == 0.5 and not f.lse_contiguous


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 4), hkv=st.sampled_from([1, 2, 4]), group=st.sampled_from([1, 2, 8]),
       sq=st.integers(1, 300), skv=st.integers(1, 300), dqk=st.integers(1, 300), dv=st.integers(1, 300),
       dtype=st.sampled_from(["float16", "bfloat16", "float32", "float64"]), layout=st.sampled_from(["bhsd", "bshd"]),
       sink=st.booleans(), padded=st.booleans(), causal=st.booleans(),
       left=st.one_of(st.none(), st.integers(0, 512)), right=st.one_of(st.none(), st.integers(0, 512)),
       alignment=st.sampled_from(["top_left", "bottom_right"]), target=st.sampled_from(["cpu", "sm_90a", "sm_120"]))
def test_any_valid_graph_gets_plain_facts_and_an_answer(b, hkv, group, sq, skv, dqk, dv, dtype, layout, sink, padded,
                                                       causal, left, right, alignment, target):
    graph = sdpa_backward_graph(b, hkv * group, sq, dqk, heads_kv=hkv, seq_kv=skv, head_dim_v=dv, dtype=dtype,
                                layout=layout, sink=sink, padded=padded, causal=causal, band_left=left,
                                band_right=right, alignment=alignment)
    report = probe(graph, target)
    (op,) = report.ops
    assert_plain(op.facts)
    assert op.facts.gqa_group * op.facts.heads_kv == op.facts.heads_q
    assert report.supported and op.engine in ("cute_sm120", "reference")
    assert (op.engine == "cute_sm120") == ("cute_sm120" not in op.declined)
