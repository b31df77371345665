"""frost.reference against the fp64 oracle (torch.autograd through its forward), over a hypothesis-driven matrix."""

from __future__ import annotations

import math

import torch
from hypothesis import HealthCheck, event, example, given, settings

import frost.reference as ref
from reference_cases import Case, expected, magnitudes
from strategies_reference import CORNERS, cases

TOL = 1e-10  # fp64 against fp64: relative to the magnitude of the terms summed


def padded_rows(case: Case) -> torch.Tensor:
    """(B, Sq) bool: query rows beyond seq_len_q."""
    sq = case.q.shape[2]
    lens = case.seq_len_q if case.seq_len_q is not None else [sq] * case.q.shape[0]
    return torch.arange(sq)[None, :] >= torch.tensor(lens)[:, None]


def padded_keys(case: Case) -> torch.Tensor:
    """(B, Skv) bool: keys beyond seq_len_kv."""
    skv = case.k.shape[2]
    lens = case.seq_len_kv if case.seq_len_kv is not None else [skv] * case.k.shape[0]
    return torch.arange(skv)[None, :] >= torch.tensor(lens)[:, None]


def assert_within(name: str, actual: torch.Tensor, expected: torch.Tensor, magnitude: torch.Tensor) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, (name, actual.shape, actual.dtype)
    assert torch.isfinite(actual).all(), f"{name} has non-finite values"
    err = (actual - expected).abs()
    bad = err > TOL * magnitude
    assert not bad.any(), f"{name}: max err {err.max():.3e} where magnitude {magnitude[bad].max():.3e}"


def with_garbage_in_padded_rows(case: Case, o: torch.Tensor, lse: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """o and lse as a kernel might leave them: finite junk in padded rows, which must reach no output."""
    pad = padded_rows(case)[:, None]
    gen = torch.Generator().manual_seed(7)
    o = torch.where(pad[..., None], torch.randn(o.shape, dtype=o.dtype, generator=gen), o)
    lse = torch.where(pad, torch.randn(lse.shape, dtype=lse.dtype, generator=gen), lse)
    return o, lse


def record_coverage(case: Case, want: dict) -> None:
    """Hypothesis events (shown with --hypothesis-show-statistics), so the matrix's reach is visible."""
    hq, hkv = case.q.shape[1], case.k.shape[1]
    event(f"G={hq // hkv}{' (MQA)' if hkv == 1 and hq > 1 else ''}")
    event(f"alignment={case.alignment}, causal={case.causal}")
    event(f"band=({case.band_left is not None}, {case.band_right is not None})")
    event(f"sink={case.sink is not None}, padded={case.seq_len_q is not None or case.seq_len_kv is not None}")
    live = torch.isfinite(want["lse"]) | padded_rows(case)[:, None]
    event(f"rows with no key and no sink: {not live.all()}")
    event(f"Sq == Skv: {case.q.shape[2] == case.k.shape[2]}, S = 1: {1 in (case.q.shape[2], case.k.shape[2])}")


def corner_examples(test):
    """Run the hand-picked corner cases before whatever hypothesis draws."""
    for case in CORNERS:
        test = example(case=case)(test)
    return test


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@corner_examples
@given(case=cases())
def test_backward_matches_autograd(case: Case) -> None:
    want = expected(case)
    record_coverage(case, want)
    mag = magnitudes(case, want)
    o, lse = with_garbage_in_padded_rows(case, want["o"], want["lse"])
    dq, dk, dv, dsink = ref.attention_backward(case.q, case.k, case.v, o, case.do, lse, **case.kwargs(),
                                               block_rows=case.extra["block_rows"])
    assert_within("dq", dq, want["dq"], mag["dq"])
    assert_within("dk", dk, want["dk"], mag["dk"])
    assert_within("dv", dv, want["dv"], mag["dv"])
    if case.sink is None:
        assert dsink is None
    else:
        assert_within("dsink", dsink, want["dsink"], mag["dsink"])
    assert (dq[padded_rows(case)[:, None].expand(dq.shape[:3])] == 0).all()
    keys = padded_keys(case)[:, None].expand(dk.shape[:3])
    assert (dk[keys] == 0).all() and (dv[keys] == 0).all()
    for got, like in ((dq, case.q), (dk, case.k), (dv, case.v)):
        assert got.is_contiguous() == like.is_contiguous(), "outputs keep the memory order of their input"
        assert got.transpose(1, 2).is_contiguous() == like.transpose(1, 2).is_contiguous()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@corner_examples
@given(case=cases())
def test_forward_matches_naive(case: Case) -> None:
    want = expected(case)
    o, lse = ref.attention_forward(case.q, case.k, case.v, **case.kwargs(), block_rows=case.extra["block_rows"])
    assert_within("o", o, want["o"], magnitudes(case, want)["o"])
    assert lse.dtype == torch.float64
    assert torch.equal(torch.isneginf(lse), torch.isneginf(want["lse"])), "the same rows have LSE = -inf"
    finite = torch.isfinite(want["lse"])
    assert torch.isfinite(lse[finite]).all()
    assert ((lse[finite] - want["lse"][finite]).abs() <= TOL * (1 + want["lse"][finite].abs())).all()
    pad = padded_rows(case)[:, None].expand(lse.shape)
    assert torch.isneginf(lse[pad]).all() and (o[pad] == 0).all(), "padded rows: O = 0, LSE = -inf"


def test_scale_default_is_inverse_sqrt_head_dim() -> None:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 40, dtype=torch.float64, generator=gen) for _ in range(3))
    o_default, _ = ref.attention_forward(q, k, v)
    o_explicit, _ = ref.attention_forward(q, k, v, scale=1 / math.sqrt(40))
    o_other, _ = ref.attention_forward(q, k, v, scale=1.0)
    assert torch.equal(o_default, o_explicit) and not torch.allclose(o_default, o_other)
