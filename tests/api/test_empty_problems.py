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


@pytest.mark.parametrize("b, sq, skv", EMPTY)
def test_the_graph_api_serves_what_the_functional_api_serves(b, sq, skv):
    """One rule for both: an empty problem is a valid graph; the kernels decline it (code "empty") and the
    reference engine serves it, giving what frost.sdpa_forward gives."""
    shape = dict(heads_kv=HKV, seq_kv=skv, causal=True)
    report = frost.check_support(frost.sdpa_forward_graph(b, HQ, sq, D, dtype="bfloat16", **shape), "sm_120")
    assert report.engines == {"attn": "reference"}
    assert [r.code for r in report.ops[0].declined["cute_sm120"]] == ["empty"]
    graph = frost.sdpa_forward_graph(b, HQ, sq, D, dtype="float32", **shape)
    q, k, v = (torch.randn(b, h, s, D) for s, h in ((sq, HQ), (skv, HKV), (skv, HKV)))
    outputs = frost.compile(graph, target="cpu").execute({"q": q, "k": k, "v": v})
    want_o, want_lse = frost.sdpa_forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    assert torch.equal(outputs["attn.o"], want_o.transpose(1, 2)) and torch.equal(outputs["attn.lse"], want_lse)


def test_heads_and_head_dims_are_never_empty():
    with pytest.raises(frost.GraphError, match=r"^head_dim: got 0; accepted: an int >= 1"):
        frost.sdpa_forward_graph(2, HQ, 5, 0)
    b = frost.GraphBuilder()   # declared tensor by tensor, the op's own rule names the tensor's dim
    q, k, v = (b.tensor(n, (2, HQ, 5, 0), "bfloat16") for n in "qkv")
    b.sdpa_forward(q, k, v)
    with pytest.raises(frost.GraphError, match=r"shape\[3\]: got 0; accepted: >= 1"):
        b.build()
    q = torch.randn(2, 5, 0, D)
    with pytest.raises(frost.TensorError, match=r"^q\.shape: .*Hq >= 1"):
        frost.attention(q, q, q)
