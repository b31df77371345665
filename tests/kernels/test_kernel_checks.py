"""The GPU kernel tests' checks, run on the CPU with the reference engine standing in for the kernels: every check
(dense backward, dense forward, packed forward and backward) passes a correct engine on the cases' features, and
fails an engine that is off by a little, writes a padded row, leaves an output unwritten or writes outside every
segment. The shared helpers the GPU tests call (tests/helpers: tensors, oracle, FA rule, run_cases) run here too."""

from __future__ import annotations

import pytest
import torch

from frost import reference
from frost.reference import varlen as reference_varlen
from forward_checks import FwdCase
from forward_checks import check_case as check_forward_case
from helpers.fa_rule import FLOOR, NOISE, assert_fa_rule, fa_rule, fa_rule_each, padded_rows_zero, run_cases
from kernel_oracle import Case, check_case
from packed_checks import VarCase, check_backward, check_forward, logical, segment_rows

BR = "bottom_right"
CPU = "cpu"


def assert_real_bars(report: list[str]) -> None:
    """The low-precision reference agrees with the oracle (errors of a few io-dtype ulps, not of a mask or a length
    the two were given differently), so the rule's bar is a real one."""
    assert report
    for line in report:
        ref_err = float(line.split("ref_err=")[1].split()[0])
        assert ref_err < 0.05, line


# -- dense backward (kernel_oracle.check_case) -------------------------------------------------------------------

def reference_backward(c: Case, inp, block_rows: int = 3):
    """frost.reference in the io dtype, in query blocks of another size than the check's own reference (its dK/dV
    sums run in another order)."""
    args = [inp[n] for n in ("q", "k", "v", "o", "do", "lse")]
    return reference.attention_backward(*args, sink=inp["sink"], dlse=inp["dlse"], block_rows=block_rows,
                                        **inp["kw"])


BACKWARD_CASES = [
    Case(b=2, hq=4, hkv=2, sq=20, skv=23, dqk=16, dv=8, causal=True, alignment=BR, band_left=5, band_right=2,
         seq_len_q=[20, 11], seq_len_kv=[23, 9], sink=0.5, dlse=True, seed=1),
    Case(dtype="float16", b=2, hq=2, hkv=1, sq=17, skv=1, dqk=8, dv=8, causal=True, seq_len_q=[17, 0],
         sink=[30.0, -30.0], layout="bhsd", seed=2),
    Case(b=1, hq=2, hkv=2, sq=9, skv=0, dqk=8, dv=8, sink=-1.0, seed=3),
    Case(b=2, hq=3, hkv=3, sq=12, skv=12, dqk=24, dv=24, band_left=0, band_right=0, seq_len_kv=[4, 12], seed=4),
]


@pytest.mark.parametrize("i", range(len(BACKWARD_CASES)))
def test_backward_check_passes_a_correct_engine(i):
    assert_real_bars(check_case(BACKWARD_CASES[i], reference_backward, CPU))


def _off_by(grad: str, rel: float):
    names = ("dq", "dk", "dv", "dsink")

    def run(c, inp):
        got = list(reference_backward(c, inp))
        g = got[names.index(grad)].clone()
        g[torch.unravel_index(g.abs().argmax(), g.shape)] *= 1 + rel
        got[names.index(grad)] = g
        return tuple(got)
    return run


@pytest.mark.parametrize("grad", ["dq", "dk", "dv", "dsink"])
def test_backward_check_fails_an_engine_off_by_a_few_percent(grad):
    with pytest.raises(AssertionError, match=rf"\['{grad}: "):
        check_case(BACKWARD_CASES[0], _off_by(grad, 0.05), CPU)


def test_backward_check_fails_a_written_padded_row_and_an_unwritten_output():
    c = BACKWARD_CASES[0]

    def padded_row(c, inp):
        dq, dk, dv, dsink = reference_backward(c, inp)
        dq = dq.clone()
        dq[1, :, 15] = 1e-6
        return dq, dk, dv, dsink

    def unwritten(c, inp):
        dq, dk, dv, dsink = reference_backward(c, inp)
        dv = dv.clone()
        dv[0, 0, 0, 0] = float("nan")
        return dq, dk, dv, dsink

    with pytest.raises(AssertionError, match="dq: batch 1 rows >= 11 not exactly zero"):
        check_case(c, padded_row, CPU)
    with pytest.raises(AssertionError, match="dv: non-finite entries"):
        check_case(c, unwritten, CPU)
    with pytest.raises(AssertionError, match="dsink: a value where the oracle has none"):
        check_case(BACKWARD_CASES[3], lambda c, inp: (*reference_backward(c, inp)[:3], torch.zeros(3)), CPU)


# -- dense forward (forward_checks.check_case) -------------------------------------------------------------------

def reference_forward(c, q, k, v, o, lse, block_rows: int = 5, **kw):
    """frost.reference in the io dtype into the poisoned outputs, in blocks of another size."""
    o_ref, lse_ref = reference.attention_forward(q, k, v, block_rows=block_rows, **kw)
    o.copy_(o_ref)
    lse.copy_(lse_ref)


FORWARD_CASES = [
    FwdCase("bfloat16", 16, 8, 2, 4, 2, 21, 30, True, BR, band_left=6, seq_len_q=[21, 0], seq_len_kv=[30, 7],
            sink=[1.5, -30.0, 0.0, 30.0], seed=1),
    FwdCase("float16", 8, 8, 1, 2, 1, 13, 5, True, BR, layout="bhsd", seed=2),
    FwdCase("bfloat16", 8, 8, 2, 2, 2, 7, 0, sink=2.0, seed=3),
]


@pytest.mark.parametrize("i", range(len(FORWARD_CASES)))
def test_forward_check_passes_a_correct_engine(i):
    assert_real_bars(check_forward_case(FORWARD_CASES[i], reference_forward, CPU))


def test_forward_check_fails_a_wrong_output_an_unwritten_lse_and_a_written_padded_row():
    c = FORWARD_CASES[0]

    def off(c, q, k, v, o, lse, **kw):
        reference_forward(c, q, k, v, o, lse, **kw)
        o[0, 0, 3] *= 1.05

    def lse_unwritten(c, q, k, v, o, lse, **kw):
        reference_forward(c, q, k, v, o, lse, **kw)
        lse[1, :, 0] = float("nan")

    def padded_row(c, q, k, v, o, lse, **kw):
        reference_forward(c, q, k, v, o, lse, **kw)
        o[1, :, 2] = 0.5

    with pytest.raises(AssertionError, match=r"\['o: "):
        check_forward_case(c, off, CPU)
    with pytest.raises(AssertionError, match="lse: non-finite entries"):
        check_forward_case(c, lse_unwritten, CPU)
    with pytest.raises(AssertionError, match="o: batch 1 rows >= 0 not exactly zero"):
        check_forward_case(c, padded_row, CPU)


# -- packed forward and backward (packed_checks) -----------------------------------------------------------------

def _segment_args(inp):
    return dict(scale=inp["scale"], seqused_q=inp["used"][0], seqused_kv=inp["used"][1], sink=inp["sink"],
                **inp["mask"])


def packed_reference_forward(c, inp, o, lse):
    """frost.reference.varlen in the io dtype, written only inside the segments (the kernels' contract)."""
    p = inp["packed"]
    o_ref, lse_ref = reference_varlen.attention_forward_varlen(
        *(logical(inp[n]) for n in ("q", "k", "v")), p.cu_seqlens_q, p.cu_seqlens_kv, **_segment_args(inp))
    inside, _ = segment_rows(p.cu_seqlens_q, o.shape[0])
    logical(o)[:, inside] = o_ref[:, inside]
    lse[:, inside] = lse_ref[:, inside]


def packed_reference_backward(c, inp, o, lse):
    """frost.reference.varlen's backward in the io dtype into NaN-poisoned gradients, inside the segments."""
    p = inp["packed"]
    q, k, v, do = (inp[n] for n in ("q", "k", "v", "do"))
    grads = reference_varlen.attention_backward_varlen(
        *(logical(t) for t in (q, k, v, o, do)), lse, p.cu_seqlens_q, p.cu_seqlens_kv, **_segment_args(inp))
    out = []
    for t, g, cu in zip((q, k, v), grads, (p.cu_seqlens_q, p.cu_seqlens_kv, p.cu_seqlens_kv)):
        dest = inp["alloc"](*t.shape)
        inside, _ = segment_rows(cu, t.shape[0])
        logical(dest)[:, inside] = g[:, inside]
        out.append(dest)
    return (*out, grads[3])


PACKED_CASES = [
    VarCase((9, 0, 1, 13), dqk=8, dv=8, hq=4, hkv=2, causal=True, sink=1.0, extra=3, seed=1),
    VarCase((9, 0, 5), (12, 3, 0), dtype="float16", dqk=16, dv=8, hq=4, hkv=1, causal=True, alignment=BR,
            sink=-30.0, lse_token_major=True, spread=True, seed=2),
    VarCase((11, 0, 6), (10, 5, 6), dqk=8, dv=8, hq=2, hkv=1, band_left=3, band_right=2, alignment=BR,
            used_q=(7, 0, 6), used_kv=(10, 5, 0), deterministic=True, token_stride=128, extra=2, seed=3),
]


@pytest.mark.parametrize("i", range(len(PACKED_CASES)))
def test_packed_checks_pass_a_correct_engine(i):
    assert_real_bars(check_forward(PACKED_CASES[i], packed_reference_forward, CPU))
    assert_real_bars(check_backward(PACKED_CASES[i], packed_reference_backward, CPU))


def test_packed_checks_fail_writes_outside_every_segment_and_wrong_values():
    c = PACKED_CASES[0]

    def writes_past_the_end(c, inp, o, lse):
        packed_reference_forward(c, inp, o, lse)
        o[-1] = 0.0

    def off(c, inp, o, lse):
        dq, dk, dv, dsink = packed_reference_backward(c, inp, o, lse)
        return dq, dk, dv, dsink * 1.05

    def padding_written(c, inp, o, lse):
        packed_reference_forward(c, inp, o, lse)
        o[7] = 1.0   # a padding row of PACKED_CASES[2]: sequence 0 uses 7 of its 11 tokens

    with pytest.raises(AssertionError, match="o: rows outside every segment were written"):
        check_forward(c, writes_past_the_end, CPU)
    with pytest.raises(AssertionError, match="dsink: "):
        check_backward(c, off, CPU)
    with pytest.raises(AssertionError, match=r"o: padding rows \(past seqused\) not exactly zero"):
        check_forward(PACKED_CASES[2], padding_written, CPU)


# -- the FA rule and run_cases themselves ----------------------------------------------------------------------

def test_fa_rule_bound_is_twice_the_reference_error_plus_floor_and_noise():
    ref = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    lowp = ref + torch.tensor([0.0, 1e-2, 0.0], dtype=torch.float64)
    bound = 2 * 1e-2 + FLOOR * 2.0 + NOISE * 4.0
    for excess, ok in ((-1e-9, True), (1e-9, False)):
        failed, report = [], []
        got = ref + torch.tensor([bound + excess, 0.0, 0.0], dtype=torch.float64)
        fa_rule("x", got, ref, lowp, failed, report, noise_scale=4.0)
        assert (not failed) == ok and len(report) == 1, (excess, failed)
    # the default noise scale is the output's own largest value; floor 0 and an absolute term instead
    failed = []
    fa_rule("x", ref + 2 * 1e-2 + (FLOOR + NOISE) * 2.0 + 1e-9, ref, lowp, failed, [])
    fa_rule("x", ref + 2 * 1e-2 + 1e-6, ref, lowp, failed, [], floor=0.0, noise_scale=0.0, atol=1e-6 - 1e-9)
    assert len(failed) == 2
    assert "x err=" in assert_fa_rule("x", ref, ref, lowp)


def test_fa_rule_matches_non_finite_entries_exactly():
    ref = torch.tensor([float("-inf"), 1.0], dtype=torch.float64)
    for got, ok in (([float("-inf"), 1.0], True), ([0.0, 1.0], False), ([float("nan"), 1.0], False),
                    ([float("inf"), 1.0], False)):
        failed = []
        fa_rule("lse", torch.tensor(got), ref, ref, failed, [])
        assert (not failed) == ok, (got, failed)
    failed, report = [], []
    fa_rule("lse", torch.full((2,), float("-inf")), torch.full((2,), float("-inf"), dtype=torch.float64),
            torch.full((2,), float("-inf")), failed, report)
    assert not failed and not report
    failed = []
    fa_rule_each(("a", "b"), (torch.ones(1), None), (torch.ones(1, dtype=torch.float64), None),
                 (torch.ones(1), None), failed, [])
    assert not failed


def test_padded_rows_zero_and_run_cases():
    t = torch.zeros(2, 1, 4, 3)
    t[0, :, :2] = 1.0
    failed = []
    padded_rows_zero("o", t, [2, 0], failed)
    padded_rows_zero("o", t, None, failed)
    assert failed == []
    t[1, 0, 3, 1] = -0.0 + 1e-30
    padded_rows_zero("o", t, torch.tensor([2, 3]), failed)
    assert failed == ["o: batch 1 rows >= 3 not exactly zero"]

    seen = []

    def check(x):
        seen.append(x)
        if not x % 2:
            raise AssertionError(f"case {x} is even")

    run_cases(check, [1, 3])
    with pytest.raises(AssertionError, match=r"2/4 failed:\ncase 0 is even\ncase 2 is even"):
        run_cases(check, [0, 1, 2, 3])
    assert seen == [1, 3, 0, 1, 2, 3]
