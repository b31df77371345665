"""Each decline reason on its own, several at once, and the engine the probe then picks."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from analyzer_graphs import B, H, S, baseline, custom, gpt_oss, permuted_strides, pitched_strides
from frost.analyzer import (CODES, CUTE_SM120, REFERENCE, REFERENCE_FORWARD, declines, facts_for, normalise_target,
                            probe)
from frost.analyzer.capability import CUTE_SM120_FORWARD
from frost.ir import sdpa_backward_graph, sdpa_backward_varlen_graph, sdpa_forward_graph


def _facts(graph):
    return facts_for(graph, "attn")


def test_baseline_is_served_by_the_kernels():
    report = probe(baseline(), "sm_120")
    assert report.supported and report.engines == {"attn": "cute_sm120"}
    assert report.ops[0].declined == {}


# An engine narrower than cute_sm120 (which now serves every mask, GQA, padding, sink, dlse and deterministic mode): the
# decline rules for those features are exercised against it.
NARROW = dataclasses.replace(CUTE_SM120, masks=("none", "causal"), gqa=False, padding=False, sink=False,
                             dlse=False, deterministic=False)

# (graph, target, capability, expected [(code, field)]) -- each case breaks exactly one rule
ALONE = {
    "op_kind": (lambda: sdpa_forward_graph(2, 4, 256, 64, causal=True), "sm_120", CUTE_SM120, [("op_kind", "op")]),
    "target": (baseline, "cpu", CUTE_SM120, [("target", "target")]),
    "target_sm100": (baseline, "sm_100a", CUTE_SM120, [("target", "target")]),
    "dtype": (lambda: baseline(dtype="float32"), "sm_120", CUTE_SM120, [("dtype", "dtype")]),
    "head_dim_multiple": (lambda: custom(dqk=60, dv=56, strides=lambda s: pitched_strides(s, 64)), "sm_120",
                          CUTE_SM120, [("head_dim_multiple", "head_dim_qk")]),
    "head_dim_max": (lambda: custom(dqk=264, dv=256), "sm_121", CUTE_SM120, [("head_dim_max", "head_dim_qk")]),
    "dv_gt_dqk": (lambda: custom(dqk=64, dv=128, causal=True), "sm_120", CUTE_SM120, [("dv_gt_dqk", "head_dim_v")]),
    "mask": (lambda: baseline(band_left=128), "sm_120", NARROW, [("mask", "mask.kind")]),
    "alignment": (lambda: baseline(alignment="bottom_right"), "sm_120",
                  dataclasses.replace(CUTE_SM120, alignments=("top_left",)), [("alignment", "mask.alignment")]),
    "gqa": (lambda: baseline(heads_kv=2), "sm_120", NARROW, [("gqa", "gqa_group")]),
    "padding": (lambda: baseline(padded=True), "sm_120", NARROW,
                [("padding", "has_padding_q"), ("padding", "has_padding_kv")]),
    "ragged": (lambda: sdpa_backward_varlen_graph(B, H, 3 * S, S, 64, causal=True), "sm_120",
               dataclasses.replace(CUTE_SM120, ragged=False), [("ragged", "varlen")]),
    # no batch: nothing to compute (the reference engine serves it)
    "empty": (lambda: sdpa_backward_graph(0, H, S, 64, causal=True), "sm_120", CUTE_SM120, [("empty", "empty")]),
    "empty_keys": (lambda: sdpa_forward_graph(B, H, S, 64, seq_kv=0), "sm_120", CUTE_SM120_FORWARD,
                   [("empty", "empty")]),
    "sink": (lambda: baseline(sink=True), "sm_120", NARROW, [("sink", "has_sink")]),
    "dlse": (lambda: baseline(dlse=True), "sm_120", NARROW, [("dlse", "has_dlse")]),
    "deterministic": (lambda: baseline(deterministic=True), "sm_90", NARROW,
                      [("deterministic", "deterministic")]),
    # head dim stored outermost-but-one (B, S, D, H): stride 8 on D, still 16-byte aligned
    "layout_head_dim": (lambda: custom(strides=lambda s: permuted_strides(s, (0, 2, 3, 1)), causal=True), "sm_120",
                        CUTE_SM120, [("layout_head_dim", "head_dim_contiguous")]),
    # one head's fp32 dQ accumulator would pass 2^31 elements (9M rows x 256 columns): 32-bit offsets
    "seq_len_max": (lambda: sdpa_backward_graph(1, 1, 9_000_000, 256, causal=True), "sm_120", CUTE_SM120,
                    [("seq_len_max", "seq_q")]),
    "seq_len_max_kv": (lambda: sdpa_backward_graph(1, 1, 64, 64, seq_kv=(1 << 28) + 1), "sm_120", CUTE_SM120,
                       [("seq_len_max", "seq_kv")]),
    # rows pitched to 68 elements = 136 bytes
    "stride_alignment": (lambda: custom(strides=lambda s: pitched_strides(s, 68), causal=True), "sm_120",
                         CUTE_SM120, [("stride_alignment", "strides_16b_aligned")]),
    # BHSD rows pitched to 2**24 elements: q's and do's sequence stride leaves 32 bits within a query tile
    "seq_stride_max": (lambda: custom(strides=lambda s: (s[1] * s[2] << 24, s[2] << 24, 1 << 24, 1)), "sm_120",
                       CUTE_SM120, [("seq_stride_max", "seq_strides_32bit")]),
}


@pytest.mark.parametrize("case", sorted(ALONE))
def test_each_reason_alone(case):
    make, target, cap, expected = ALONE[case]
    facts, target = _facts(make()), normalise_target(target)
    reasons = declines(cap, facts, target)
    assert [(r.code, r.field) for r in reasons] == expected
    for r in reasons:
        assert repr(r.value) in r.message and r.accepted in r.message and cap.engine in r.message
        assert r.value == (target if r.field == "target" else functools.reduce(getattr, r.field.split("."), facts))
    reference = REFERENCE_FORWARD if facts.op == "sdpa_forward" else REFERENCE
    assert declines(reference, facts, target) == []


def test_every_code_has_a_test_on_its_own():
    assert {code for *_, expected in ALONE.values() for code, _ in expected} == set(CODES)


def test_several_reasons_at_once_are_all_reported_in_rule_order():
    report = probe(gpt_oss(), "cpu", engines=(NARROW, REFERENCE))
    op = report.ops[0]
    assert op.engine == "reference" and list(op.declined) == ["cute_sm120"]
    assert [(r.code, r.field) for r in op.declined["cute_sm120"]] == [
        ("target", "target"), ("mask", "mask.kind"), ("gqa", "gqa_group"),
        ("padding", "has_padding_q"), ("padding", "has_padding_kv"), ("sink", "has_sink")]


def test_messages_name_value_and_alternative():
    facts = _facts(custom(dqk=60, dv=56, strides=lambda s: pitched_strides(s, 64)))
    (reason,) = declines(CUTE_SM120, facts, "sm_120")
    assert reason.message == ("head_dim_qk=60 is not served by cute_sm120; accepted: a multiple of 8 (pad to 64)")
    (reason,) = declines(CUTE_SM120, _facts(baseline()), "cpu")
    assert reason.value == "cpu" and "sm_120" in reason.accepted and "sm_90" in reason.accepted


def test_alignment_only_matters_under_a_mask():
    top_left_only = dataclasses.replace(CUTE_SM120, alignments=("top_left",))
    facts = _facts(baseline(causal=False, alignment="bottom_right"))
    assert facts.mask.kind == "none" and declines(top_left_only, facts, "sm_120") == []


def test_unlisted_cuda_arch_is_served_by_reference_only():
    op = probe(baseline(), "sm_89").ops[0]
    assert op.engine == "reference"
    assert [r.code for r in op.declined["cute_sm120"]] == ["target"]


def test_pinned_engine_that_declines_gives_unsupported_not_an_exception():
    report = probe(gpt_oss(), "sm_120", engines=(NARROW,))
    assert not report.supported and report.engines == {"attn": None}
    assert "NOT supported" in report.to_text() and "[sink]" in report.to_text()


def test_right_band_widening_is_a_band_mask():
    facts = _facts(baseline(band_right=16))
    assert (facts.mask.kind, facts.mask.left, facts.mask.right) == ("band", None, 16)
    assert [r.code for r in declines(NARROW, facts, "sm_120")] == ["mask"]
    assert declines(CUTE_SM120, facts, "sm_120") == []
