"""Empty problems (B = 0, Sq = 0 or Skv = 0) give empty outputs and gradients, as torch's SDPA does, through
frost.attention (forward and backward) and frost.sdpa_backward; with Skv = 0 every query row sees no key, so
out = 0, lse = the sink (or -inf), and the sink's gradient is what flows in through lse."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import frost

HQ, HKV, D = 4, 2, 8
EMPTY = [(0, 5, 5), (2, 0, 5), (2, 5, 0)]


def _leaf(*shape):
    return torch.randn(*shape, dtype=torch.float64).requires_grad_()


@pytest.mark.parametrize("b, sq, skv", EMPTY)
def test_attention_matches_torch_sdpa_on_empty_problems(b, sq, skv):
    q, k, v = _leaf(b, sq, HQ, D), _leaf(b, skv, HKV, D), _leaf(b, skv, HKV, D)
    tq, tk, tv = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    want = F.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True)
    torch.nan_to_num(want, nan=0.0).sum().backward()
    out = frost.attention(q, k, v)
    out.sum().backward()
    assert out.shape == want.transpose(1, 2).shape and not out.isnan().any()
    assert not out.abs().sum()
    for got, ref in ((q.grad, tq.grad), (k.grad, tk.grad), (v.grad, tv.grad)):
        assert got.shape == ref.transpose(1, 2).shape and not got.abs().sum()


@pytest.mark.parametrize("b, sq, skv", EMPTY)
def test_sink_gradient_on_empty_problems_is_what_flows_through_lse(b, sq, skv):
    q, k, v = _leaf(b, sq, HQ, D), _leaf(b, skv, HKV, D), _leaf(b, skv, HKV, D)
    sink = torch.randn(HQ, requires_grad=True)
    out, lse = frost.attention(q, k, v, sink=sink, causal=True, return_lse=True)
    (out.sum() + lse.sum()).backward()
    assert lse.shape == (b, HQ, sq)
    if skv == 0:   # lse_i = log(exp(sink_h)) = sink_h for every row, so d(sum lse)/d sink_h = B * Sq
        assert torch.equal(lse, sink.detach().view(1, HQ, 1).expand(b, HQ, sq))
    assert torch.equal(sink.grad, torch.full((HQ,), float(b * sq * (skv == 0))))


@pytest.mark.parametrize("b, sq, skv", EMPTY)
def test_sdpa_backward_returns_empty_gradients(b, sq, skv):
    q, k, v = (torch.randn(b, s, h, D, dtype=torch.bfloat16) for s, h in ((sq, HQ), (skv, HKV), (skv, HKV)))
    out, lse = frost.attention(q, k, v, return_lse=True)
    dq, dk, dv, dsink = frost.sdpa_backward(q, k, v, out, torch.randn_like(out), lse)
    assert dsink is None
    for grad, x in ((dq, q), (dk, k), (dv, v)):
        assert grad.shape == x.shape and grad.dtype == x.dtype and grad.stride() == x.stride()
        assert not grad.float().abs().sum()


def test_empty_problems_are_still_checked():
    q, k, v = (torch.randn(0, 5, h, D) for h in (HQ, 3, 3))
    with pytest.raises(frost.TensorError, match=r"^k\.shape"):
        frost.attention(q, k, v)
