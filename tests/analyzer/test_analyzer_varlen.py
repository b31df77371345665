"""Packed variable-length (ragged) ops: claimed by the patterns, described by Facts the way the kernels read them
(B from the offsets, max_len as the sequence, T as the tokens, heads from dim 0, head dims from the last dim), and
declined with the `ragged` code by an engine whose table does not serve them."""

from __future__ import annotations

import dataclasses
import math

import pytest

from frost.analyzer import CUTE_SM120, analyze, facts_for, probe, render_support_matrix
from frost.analyzer.capability import CUTE_SM120_FORWARD, ENGINES
from frost.ir import GraphBuilder, Ragged, sdpa_backward_graph, sdpa_backward_varlen_graph, sdpa_forward_varlen_graph
from frost.limits import SEQ_STRIDE_LIMIT


def test_backward_facts_read_offsets_max_len_and_tokens():
    g = sdpa_backward_varlen_graph(5, 8, 1000, 300, 128, heads_kv=2, tokens_kv=1200, max_len_kv=400, head_dim_v=64,
                                   sink=True, seqused=True, dlse=True, causal=True, alignment="bottom_right")
    f = facts_for(g, "attn")
    assert f.varlen and (f.batch, f.heads_q, f.heads_kv, f.gqa_group) == (5, 8, 2, 4)
    assert (f.seq_q, f.seq_kv, f.tokens_q, f.tokens_kv) == (300, 400, 1000, 1200)
    assert (f.head_dim_qk, f.head_dim_v, f.attn_scale) == (128, 64, 1 / math.sqrt(128))
    assert f.has_padding_q and f.has_padding_kv and f.has_sink and f.has_dlse
    assert (f.layout, f.head_dim_contiguous, f.strides_16b_aligned, f.lse_contiguous) == ("thd", True, True, True)
    assert f.seq_strides_32bit and not f.needs_int64_offsets


def test_forward_facts_and_dense_tokens():
    f = facts_for(sdpa_forward_varlen_graph(1, 4, 17, 0, 64), "attn")
    assert (f.op, f.varlen, f.batch, f.seq_q, f.seq_kv, f.tokens_q, f.tokens_kv) == \
        ("sdpa_forward", True, 1, 0, 0, 17, 17)
    dense = facts_for(sdpa_backward_graph(3, 4, 40, 64, seq_kv=50), "attn")
    assert not dense.varlen and (dense.tokens_q, dense.tokens_kv) == (120, 150)


@pytest.mark.parametrize("layout, expected", [("bshd", "thd"), ("bhsd", "strided")])
def test_packed_layout(layout, expected):
    assert facts_for(sdpa_backward_varlen_graph(2, 4, 64, 32, 64, layout=layout), "attn").layout == expected


def _packed(q_strides=None, lse_strides=None, tokens=64, heads=4, dim=64):
    """A packed backward whose q (and lse) take the given strides; every other tensor packed THD."""
    b = GraphBuilder("packed")
    cu = b.tensor("cu", (3,), "int32")
    r = Ragged(offsets=cu, max_len=tokens)
    q = b.tensor("q", (heads, tokens, dim), "bfloat16", layout="bshd", strides=q_strides, ragged=r)
    k, v, o, do = (b.tensor(n, (heads, tokens, dim), "bfloat16", layout="bshd", ragged=r) for n in "kvo" + "d")
    lse = b.tensor("lse", (heads, tokens), "float32", strides=lse_strides, ragged=r)
    b.sdpa_backward(q, k, v, o, do, lse, cu_seqlens_q=cu, cu_seqlens_kv=cu, name="attn")
    return b.build()


def test_strides_are_read_along_the_token_axis():
    token_major = facts_for(_packed(lse_strides=(1, 4)), "attn")
    assert not token_major.lse_contiguous and token_major.layout == "thd"
    pitched = facts_for(_packed(q_strides=(64, 4 * 64 + 8, 1)), "attn")      # rows pitched by 8 extra elements
    assert pitched.layout == "thd" and pitched.strides_16b_aligned
    odd = facts_for(_packed(q_strides=(64, 4 * 64 + 4, 1)), "attn")
    assert not odd.strides_16b_aligned
    far = facts_for(_packed(q_strides=(64, SEQ_STRIDE_LIMIT, 1)), "attn")
    assert not far.seq_strides_32bit
    head_dim_strided = facts_for(_packed(q_strides=(1, 4 * 64, 4)), "attn")
    assert head_dim_strided.layout == "strided" and not head_dim_strided.head_dim_contiguous


def test_a_long_packed_batch_needs_int64_offsets():
    f = facts_for(sdpa_backward_varlen_graph(8, 64, 1 << 20, 1 << 17, 128), "attn")
    assert f.needs_int64_offsets and f.seq_strides_32bit


def test_packed_ops_are_claimed():
    g = sdpa_backward_varlen_graph(2, 4, 64, 32, 64)
    analysis = analyze(g)
    assert [m.name for m in analysis.matched] == ["attn"] and analysis.unclaimed == ()
    assert set(analysis.matched[0].binding.reads) >= {"cu_seqlens_q", "cu_seqlens_kv"}


@pytest.mark.parametrize("make", [lambda: sdpa_backward_varlen_graph(3, 8, 600, 256, 64, causal=True),
                                  lambda: sdpa_forward_varlen_graph(3, 8, 600, 256, 64, causal=True)])
def test_an_engine_without_ragged_declines_and_the_reference_serves(make):
    g = make()
    narrow = tuple(dataclasses.replace(c, ragged=False) if c.engine == "cute_sm120" else c for c in ENGINES)
    report = probe(g, "sm_120", engines=narrow)
    (op,) = report.ops
    assert report.supported and op.engine == "reference"
    (reason,) = op.declined["cute_sm120"]
    assert (reason.code, reason.field, reason.value) == ("ragged", "varlen", True)
    assert "cu_seqlens" in reason.accepted
    text = report.to_text()
    assert "[ragged]" in text and "varlen" in text and "Tq=600" in text and "max_Sq=256" in text


def test_the_kernel_tables_start_without_ragged():
    """The cute tables serve no packed op until the kernels read cu_seqlens (the probe then picks the reference)."""
    assert not CUTE_SM120.ragged and not CUTE_SM120_FORWARD.ragged
    report = probe(sdpa_backward_varlen_graph(3, 8, 600, 256, 64), "sm_120", engines=(CUTE_SM120,))
    assert not report.supported and [r.code for r in report.ops[0].declined["cute_sm120"]] == ["ragged"]


def test_support_matrix_has_the_packed_row_and_code():
    text = render_support_matrix()
    assert text.count("| Packed sequences (cu_seqlens, THD) |") == 2
    assert "| `ragged` | `varlen` |" in text
