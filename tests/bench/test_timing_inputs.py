"""Iteration planning, L2 rotation and the shared inputs (CPU)."""

import math

import pytest

from frost.bench import inputs, timing
from frost.bench.cases import case


def test_plan_iters_bounds():
    assert timing.plan_iters(1.0, 20, 10.0) == 20
    assert timing.plan_iters(4000.0, 20, 10.0) == 3
    assert timing.plan_iters(1000.0, 20, 10.0) == 10


def test_median_on_wall_clock_calls_every_set():
    seen = []
    t = timing.median_ms(seen.append, 3, warmup=2, iters=6, device="cpu")
    assert t.calls == 6 and t.ms >= 0 and t.first_s >= 0
    assert seen[:2] == [0, 1] and set(seen[3:]) == {0, 1, 2}


def test_host_time_runs_bursts_over_every_set():
    seen = []
    us = timing.host_us(seen.append, 3, burst=4, bursts=3, device="cpu")
    assert us >= 0 and len(seen) == 12 and set(seen) == {0, 1, 2}


def test_rotation_only_when_a_set_fits_in_l2():
    l2 = 50 << 20
    assert inputs.rotation_count(200 << 20, l2) == 1
    assert inputs.rotation_count(20 << 20, l2) == 1 + math.ceil(50 / 20)
    assert inputs.rotation_count(1 << 10, l2) == inputs.ROTATION_CAP


def test_set_bytes_counts_inputs_outputs_and_lse():
    c = case("x", 2, 4, 8, 16, hkv=2)
    q, kv = 2 * 8 * 4 * 16, 2 * 8 * 2 * 16
    assert inputs.set_bytes(c, 2) == (4 * q + 4 * kv) * 2 + 2 * 8 * 4 * 4


def oracle_forward(c, s):
    """The fp64 oracle on a set's inputs, rounded to fp32 like the set's LSE: out (B, S, Hq, Dv) and LSE
    (B, Hq, S); `window` keys, the query's own included, end at the diagonal (causal)."""
    from helpers import oracle_api

    left = None if c.window is None else c.window - 1
    out, lse = oracle_api.attention(s.q, s.k, s.v, **s.optional, causal=c.causal, window_size=(left, None),
                                    return_lse=True)
    return out.float(), lse.float()


@pytest.mark.parametrize("c", [case("swa-sink", 2, 4, 48, 16, hkv=2, causal=True, window=8, sink=True),
                               case("causal", 1, 2, 40, 8, causal=True)])
def test_reference_forward_matches_naive(c):
    torch = pytest.importorskip("torch")
    s = inputs.make_sets(c, torch.bfloat16, "cpu", 1)[0]
    out, lse = oracle_forward(c, s)
    assert torch.allclose(s.lse, lse, atol=1e-5)
    assert torch.allclose(s.out.float(), out, atol=2e-2)
    assert s.dout.abs().sum() > 0 and s.q.abs().sum() > 0            # never zeros


def test_a_set_carries_the_case_optional_inputs_by_spec_role():
    """The optional inputs are a mapping by frost.spec role, drawn after q, k, v and dout from the same generator;
    a case without them has an empty mapping, and a set has no attribute per role."""
    torch = pytest.importorskip("torch")
    with_sink = case("sink", 1, 4, 8, 16, hkv=2, causal=True, sink=True)
    s = inputs.make_sets(with_sink, torch.bfloat16, "cpu", 1)[0]
    assert list(s.optional) == ["sink"]
    assert s.optional["sink"].dtype == torch.float32 and s.optional["sink"].shape == (4,)
    gen = torch.Generator().manual_seed(0)
    for shape in [(1, 8, 4, 16), (1, 8, 2, 16), (1, 8, 2, 16), (1, 8, 4, 16)]:
        torch.randn(shape, generator=gen)
    torch.testing.assert_close(s.optional["sink"], torch.randn(4, generator=gen))
    plain = inputs.make_sets(case("plain", 1, 2, 8, 16), torch.bfloat16, "cpu", 1)[0]
    assert plain.optional == {}
    with pytest.raises(AttributeError):
        plain.dq
