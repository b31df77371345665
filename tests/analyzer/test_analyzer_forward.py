"""The analyzer on forwards: the SDPA_FORWARD pattern, the forward's Facts, its capability tables (cute_sm120 and
reference), every reason the kernel declines, graphs holding a forward and its backward, and the support matrix."""

from __future__ import annotations

import dataclasses

import pytest

from analyzer_graphs import gpt_oss, pitched_strides
from frost.analyzer import (CUTE_SM120, CUTE_SM120_FORWARD, REFERENCE, REFERENCE_FORWARD, analyze, declines,
                            facts_for, normalise_target, probe, render_support_matrix)
from frost.errors import EngineError
from frost.ir import GraphBuilder, sdpa_forward_graph
from frost.api.support import check_support
from frost.spec import Mask

B, H, S, D = 2, 8, 256, 64


def forward(dqk=D, dv=D, dtype="bfloat16", strides=None, heads_kv=H, seq_kv=S, **op):
    g = GraphBuilder("fwd")
    shapes = {"q": (B, H, S, dqk), "k": (B, heads_kv, seq_kv, dqk), "v": (B, heads_kv, seq_kv, dv)}
    names = {n: g.tensor(n, s, dtype, layout="bshd", strides=strides(s) if strides else None)
             for n, s in shapes.items()}
    g.sdpa_forward(names["q"], names["k"], names["v"], name="attn", **op)
    return g.build()


def gpt_oss_forward():
    return sdpa_forward_graph(2, 64, 4096, 64, heads_kv=8, sink=True, padded=True, causal=True,
                              alignment="bottom_right", band_left=128)


def test_pattern_and_facts():
    (m,) = analyze(gpt_oss_forward()).matched
    f = m.facts
    assert m.pattern.label == "sdpa_forward" and f.op == "sdpa_forward"
    assert (f.batch, f.heads_q, f.heads_kv, f.gqa_group, f.seq_q, f.seq_kv) == (2, 64, 8, 8, 4096, 4096)
    assert f.mask == Mask(128, 0, "bottom_right") and f.mask.kind == "band"
    assert f.has_sink and f.has_padding_q and f.has_padding_kv and not f.has_dlse and not f.deterministic
    assert f.layout == "bshd" and f.head_dim_contiguous and f.strides_16b_aligned and f.lse_contiguous
    assert f.attn_scale == pytest.approx(1 / 8)
    assert facts_for(gpt_oss(), "attn").op == "sdpa_backward"


@pytest.mark.parametrize("target, engine", [("sm_120", "cute_sm120"), ("sm_90a", "cute_sm120"), ("cpu", "reference"),
                                            ("sm_100", "reference")])
def test_the_kernel_serves_the_gpt_oss_forward_on_sm120_class_targets(target, engine):
    report = probe(gpt_oss_forward(), target)
    assert report.supported and report.engines == {"attn": engine}
    if engine == "cute_sm120":
        assert report.ops[0].declined == {}
    else:
        assert [r.code for r in report.ops[0].declined["cute_sm120"]] == ["target"]


# (graph, expected [(code, field)]) -- each breaks exactly one rule of the cute_sm120 forward table
ALONE = {
    "dtype": (lambda: forward(dtype="float32"), [("dtype", "dtype")]),
    "head_dim_multiple": (lambda: forward(dqk=60, dv=56, strides=lambda s: pitched_strides(s, 64)),
                          [("head_dim_multiple", "head_dim_qk")]),
    "head_dim_max": (lambda: forward(dqk=264, dv=256), [("head_dim_max", "head_dim_qk")]),
    "dv_gt_dqk": (lambda: forward(dqk=64, dv=128), [("dv_gt_dqk", "head_dim_v")]),
    # head dim stored outermost-but-one (B, S, D, H): stride H on D, still 16-byte aligned
    "layout_head_dim": (lambda: forward(strides=lambda s: (s[2] * s[3] * s[1], 1, s[3] * s[1], s[1])),
                        [("layout_head_dim", "head_dim_contiguous")]),
    "stride_alignment": (lambda: forward(strides=lambda s: pitched_strides(s, 68)),
                         [("stride_alignment", "strides_16b_aligned")]),
    "seq_len_max": (lambda: forward(seq_kv=(1 << 28) + 8), [("seq_len_max", "seq_kv")]),
}


@pytest.mark.parametrize("case", sorted(ALONE))
def test_each_reason_alone(case):
    make, expected = ALONE[case]
    facts = facts_for(make(), "attn")
    reasons = declines(CUTE_SM120_FORWARD, facts, "sm_120")
    assert [(r.code, r.field) for r in reasons] == expected
    for r in reasons:
        assert repr(r.value) in r.message and r.accepted in r.message and "cute_sm120" in r.message
    assert declines(REFERENCE_FORWARD, facts, "sm_120") == []
    report = probe(make(), "sm_120")
    assert report.engines == {"attn": "reference"} and "cute_sm120" in report.ops[0].declined


def test_the_forward_kernel_serves_what_only_the_backward_limits():
    """No dQ accumulator and 64-bit strides: a long query sequence at d256 and a 2^24-element sequence stride are
    the backward's limits, not the forward's."""
    long_q = sdpa_forward_graph(1, 1, 9_000_000, 256, causal=True)
    assert probe(long_q, "sm_120").engines == {"attn": "cute_sm120"}
    wide = forward(strides=lambda s: (s[1] * s[2] << 24, s[2] << 24, 1 << 24, 1))
    assert not facts_for(wide, "attn").seq_strides_32bit
    assert declines(CUTE_SM120_FORWARD, facts_for(wide, "attn"), "sm_120") == []


def test_every_feature_the_kernel_serves():
    graphs = [sdpa_forward_graph(2, 8, 77, d, heads_kv=kv, head_dim_v=dv, sink=sink, padded=pad, **mask)
              for d, dv, kv, sink, pad, mask in (
                  (64, 64, 1, True, True, dict(causal=True)), (128, 128, 2, False, False, dict()),
                  (192, 128, 8, True, False, dict(band_left=0, band_right=0)), (40, 40, 4, False, True,
                  dict(causal=True, band_right=16, alignment="bottom_right")), (256, 256, 8, True, True,
                  dict(band_left=3, band_right=40)))]
    for g in graphs:
        report = probe(g, "sm_120", (CUTE_SM120_FORWARD,))
        assert report.supported, report.to_text()


def test_an_engine_without_a_forward_table_declines_with_op_kind():
    report = probe(gpt_oss_forward(), "sm_120", (CUTE_SM120, REFERENCE))
    assert not report.supported
    for engine in ("cute_sm120", "reference"):
        (reason,) = report.ops[0].declined[engine]
        assert (reason.code, reason.field, reason.value, reason.accepted) == ("op_kind", "op", "sdpa_forward",
                                                                               "sdpa_backward")


def test_a_forward_and_its_backward_are_both_claimed():
    b = GraphBuilder("layer")
    q = b.tensor("q", (2, 8, 256, 64), "bfloat16", layout="bshd")
    k, v = (b.tensor(n, (2, 2, 256, 64), "bfloat16", layout="bshd") for n in ("k", "v"))
    sink = b.tensor("sink", (8,), "float32")
    do = b.tensor("do", (2, 8, 256, 64), "bfloat16", layout="bshd")
    fwd = b.sdpa_forward(q, k, v, sink=sink, causal=True, name="fwd")
    b.sdpa_backward(q, k, v, fwd.o, do, fwd.lse, sink=sink, causal=True, name="bwd")
    g = b.build()
    report = check_support(g, "sm_120", engine="cute_sm120")
    assert report.supported and report.engines == {"fwd": "cute_sm120", "bwd": "cute_sm120"}
    assert [op.pattern for op in report.ops] == ["sdpa_forward", "sdpa_backward"]
    assert report.asked == ("cute_sm120",)
    assert check_support(g, "cpu").engines == {"fwd": "reference", "bwd": "reference"}
    with pytest.raises(EngineError):
        check_support(g, "cpu", engine="nope")


def test_support_matrix_has_a_forward_section():
    text = render_support_matrix()
    forward_part = text.split("## Attention forward (`sdpa_forward`)")[1].split("## Decline codes")[0]
    assert "`cute_sm120`" in forward_part and "`reference`" in forward_part
    assert "| Sink | yes | yes |" in forward_part and "dlse" not in forward_part
    assert CUTE_SM120_FORWARD.description in forward_part
    narrowed = dataclasses.replace(CUTE_SM120_FORWARD, sink=False)
    assert "| Sink | no | yes |" in render_support_matrix((CUTE_SM120, narrowed, REFERENCE, REFERENCE_FORWARD))
    assert normalise_target("sm_120a") == "sm_120"
