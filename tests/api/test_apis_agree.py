"""The graph, functional and autograd APIs run the same plan path, so on the reference engine they agree exactly."""

import pytest
import torch

import frost.api.plans as api
from frost.api.functional import sdpa_backward
from frost.ir import sdpa_backward_graph
from frost.api.autograd import attention
from helpers import oracle_api
from helpers.summation import assert_same_up_to_summation_order

B, SQ, HQ, HKV, D = 2, 24, 4, 2, 16
OPTIONS = dict(causal=True, causal_alignment="bottom_right", window_size=(6, None))


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, SQ, HQ, D, generator=g)
    k, v = torch.randn(B, SQ, HKV, D, generator=g), torch.randn(B, SQ, HKV, D, generator=g)
    lens = lambda short: torch.tensor([SQ, short], dtype=torch.int32)  # noqa: E731
    return dict(q=q, k=k, v=v, do=torch.randn(B, SQ, HQ, D, generator=g), sink=torch.randn(HQ, generator=g),
                seq_len_q=lens(17), seq_len_kv=lens(20))


def _autograd(d):
    q, k, v, sink = (d[n].clone().requires_grad_() for n in ("q", "k", "v", "sink"))
    out, lse = attention(q, k, v, sink=sink, seq_len_q=d["seq_len_q"], seq_len_kv=d["seq_len_kv"], return_lse=True,
                         **OPTIONS)
    (out * d["do"]).sum().backward()
    return out.detach(), lse.detach(), (q.grad, k.grad, v.grad, sink.grad)


def _graph(d, out, lse):
    graph = sdpa_backward_graph(B, HQ, SQ, D, heads_kv=HKV, dtype="float32", layout="bshd", sink=True, padded=True,
                                causal=True, alignment="bottom_right", band_left=6)
    plan = api.compile(graph, target="cpu")
    logical = {n: d[n].transpose(1, 2) for n in ("q", "k", "v", "do")} | {"o": out.transpose(1, 2), "lse": lse}
    res = plan.execute(logical | {n: d[n] for n in ("sink", "seq_len_q", "seq_len_kv")})
    return tuple(res[f"attn.{n}"].transpose(1, 2) for n in ("dq", "dk", "dv")) + (res["attn.dsink"],)


def test_graph_functional_and_autograd_agree(data):
    out, lse, from_autograd = _autograd(data)
    from_functional = sdpa_backward(data["q"], data["k"], data["v"], out, data["do"], lse, sink=data["sink"],
                                    seq_len_q=data["seq_len_q"], seq_len_kv=data["seq_len_kv"], **OPTIONS)
    from_graph = _graph(data, out, lse)
    for name, a, b, c in zip(("dq", "dk", "dv", "dsink"), from_autograd, from_functional, from_graph):
        assert_same_up_to_summation_order(a, b, name)
        assert_same_up_to_summation_order(b, c, name)
    assert from_functional[0].is_contiguous() and from_functional[0].shape == data["q"].shape


def test_autograd_matches_fp64_torch_autograd(data):
    """frost.attention's gradients against torch autograd through the fp64 oracle."""
    d64 = {n: (t.double() if t.is_floating_point() else t) for n, t in data.items()}
    q, k, v, sink = (d64[n].clone().requires_grad_() for n in ("q", "k", "v", "sink"))
    oracle_api.attention(q, k, v, sink=sink, seq_len_q=d64["seq_len_q"], seq_len_kv=d64["seq_len_kv"],
                         **OPTIONS).mul(d64["do"]).sum().backward()
    _, _, got = _autograd(data)
    for a, b in zip(got, (q.grad, k.grad, v.grad, sink.grad)):
        assert torch.allclose(a.double(), b, atol=2e-4, rtol=1e-3), (a.double() - b).abs().max()


def test_lse_gradient_matches_fp64_torch_autograd(data):
    """A loss that uses the returned LSE too (as post-hoc sink or ring-attention merges do): frost.attention passes
    that gradient on (dlse), and every gradient matches torch autograd through the fp64 oracle. Padded rows' LSE
    gets no gradient (frost skips padded rows, DESIGN.md), so the loss weights only valid rows."""
    g = torch.Generator().manual_seed(1)
    valid = torch.arange(SQ).view(1, 1, -1) < data["seq_len_q"].long().view(-1, 1, 1)
    dl = torch.randn(B, HQ, SQ, generator=g) * valid
    d64 = {n: (t.double() if t.is_floating_point() else t) for n, t in data.items()}
    q, k, v, sink = (d64[n].clone().requires_grad_() for n in ("q", "k", "v", "sink"))
    out, lse = oracle_api.attention(q, k, v, sink=sink, seq_len_q=d64["seq_len_q"], seq_len_kv=d64["seq_len_kv"],
                                    return_lse=True, **OPTIONS)
    (out.mul(d64["do"]).sum() + oracle_api.masked_lse_loss(lse, dl.double())).backward()
    leaves = [data[n].clone().requires_grad_() for n in ("q", "k", "v", "sink")]
    out32, lse32 = attention(*leaves[:3], sink=leaves[3], seq_len_q=data["seq_len_q"], seq_len_kv=data["seq_len_kv"],
                             return_lse=True, **OPTIONS)
    (out32.mul(data["do"]).sum() + lse32.mul(dl).sum()).backward()
    for a, b in zip(leaves, (q, k, v, sink)):
        assert torch.allclose(a.grad.double(), b.grad, atol=2e-4, rtol=1e-3), (a.grad.double() - b.grad).abs().max()
    # the LSE's part is not negligible: without it dq, dk and dsink are far off (dv does not depend on it)
    without = [data[n].clone().requires_grad_() for n in ("q", "k", "v", "sink")]
    attention(*without[:3], sink=without[3], seq_len_q=data["seq_len_q"], seq_len_kv=data["seq_len_kv"],
              **OPTIONS).mul(data["do"]).sum().backward()
    for i in (0, 1, 3):
        assert (without[i].grad - leaves[i].grad).abs().max() > 0.1


def test_window_size_conventions(data):
    q, k, v = data["q"], data["k"], data["v"]
    out, lse = attention(q, k, v, return_lse=True)
    a = sdpa_backward(q, k, v, out, data["do"], lse, window_size=(None, None))
    b = sdpa_backward(q, k, v, out, data["do"], lse, window_size=(-1, -1))
    assert all(torch.equal(x, y) for x, y in zip(a[:3], b[:3])) and a[3] is None


def test_functional_errors_speak_bshd(data):
    from frost.errors import TensorError

    q, k, v = data["q"], data["k"], data["v"]
    out, lse = attention(q, k, v, return_lse=True)
    with pytest.raises(TensorError, match=r"q.shape: got \(24, 4, 16\); accepted: rank 4: \(B, Sq, Hq, Dqk\)"):
        sdpa_backward(q[0], k, v, out, data["do"], lse)
    with pytest.raises(TensorError, match=rf"^k.shape: got \(1, {q.shape[1]}, {k.shape[2]}, {k.shape[3]}\)"):
        sdpa_backward(q, k[:1], v[:1], out, data["do"], lse)   # the caller's (B, S, H, D) order
    with pytest.raises(TensorError, match="window_size"):
        sdpa_backward(q, k, v, out, data["do"], lse, window_size=3)
    # a dtype the graph IR has no name for: the message says what that role accepts
    lengths = torch.full((q.shape[0],), q.shape[1], dtype=torch.int64)
    with pytest.raises(TensorError, match=r"seq_len_q.dtype: got torch.int64; accepted: torch.int32$"):
        sdpa_backward(q, k, v, out, data["do"], lse, seq_len_q=lengths)
    with pytest.raises(TensorError, match=r"q.dtype: got torch.int64; accepted: torch.float16, .*float64$"):
        sdpa_backward(q.long(), k, v, out, data["do"], lse)
