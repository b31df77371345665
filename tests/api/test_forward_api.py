"""frost.sdpa_forward on CPU (the reference engine): against the fp64 oracle, the graph API and
frost.attention; plan caching by tensor metadata; caller-named errors; empty problems; and on a kernel engine (the
fake compiler) the fast path that hands the kernel the caller's BSHD memory."""

from __future__ import annotations

import pytest
import torch

import frost
import frost.api.plans as api
from frost.errors import TensorError
from frost.ir import sdpa_forward_graph
from frost.lowering import cache_stats
from helpers import oracle_api

B, SQ, SKV, HQ, HKV, D = 2, 24, 30, 4, 2, 16


def _data(dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return dict(q=torch.randn(B, SQ, HQ, D, generator=g).to(dtype), k=torch.randn(B, SKV, HKV, D, generator=g).to(dtype),
                v=torch.randn(B, SKV, HKV, D, generator=g).to(dtype), sink=torch.randn(HQ, generator=g),
                seq_len_q=torch.tensor([SQ, 17], dtype=torch.int32),
                seq_len_kv=torch.tensor([SKV, 20], dtype=torch.int32))


def test_matches_plain_torch_attention_in_fp64():
    """Bottom-right causal with a left window, GQA, a sink and padding: out and lse (valid rows) as the fp64 oracle
    computes them; padded rows get out = 0 and lse = -inf."""
    d = _data()
    out, lse = frost.sdpa_forward(d["q"], d["k"], d["v"], causal=True, causal_alignment="bottom_right",
                                  window_size=(6, None), sink=d["sink"], seq_len_q=d["seq_len_q"],
                                  seq_len_kv=d["seq_len_kv"])
    want_out, want_lse = oracle_api.attention(d["q"], d["k"], d["v"], sink=d["sink"], seq_len_q=d["seq_len_q"],
                                              seq_len_kv=d["seq_len_kv"], causal=True,
                                              causal_alignment="bottom_right", window_size=(6, None), return_lse=True)
    assert out.shape == (B, SQ, HQ, D) and out.dtype == torch.float64 and out.is_contiguous()
    assert lse.shape == (B, HQ, SQ) and lse.dtype == torch.float32 and lse.is_contiguous()
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12)
    valid = torch.arange(SQ).view(1, 1, SQ) < d["seq_len_q"].view(B, 1, 1)
    torch.testing.assert_close(lse[valid.expand_as(lse)], want_lse.float()[valid.expand_as(lse)])
    assert bool((lse[~valid.expand_as(lse)] == float("-inf")).all())


def test_graph_functional_and_autograd_agree_exactly():
    d = _data(torch.float32)
    side = dict(sink=d["sink"], seq_len_q=d["seq_len_q"], seq_len_kv=d["seq_len_kv"])
    out, lse = frost.sdpa_forward(d["q"], d["k"], d["v"], causal=True, window_size=(3, 2), **side)
    a_out, a_lse = frost.attention(d["q"], d["k"], d["v"], causal=True, window_size=(3, 2), return_lse=True, **side)
    graph = sdpa_forward_graph(B, HQ, SQ, D, heads_kv=HKV, seq_kv=SKV, dtype="float32", sink=True, padded=True,
                               causal=True, band_left=3, band_right=2)
    res = api.compile(graph, target="cpu").execute({n: d[n].transpose(1, 2) for n in ("q", "k", "v")} | side)
    assert torch.equal(out, a_out) and torch.equal(lse, a_lse)
    assert torch.equal(out, res["attn.o"].transpose(1, 2)) and torch.equal(lse, res["attn.lse"])


def test_plans_are_cached_by_tensor_metadata():
    d = _data(torch.float32)
    frost.sdpa_forward(d["q"], d["k"], d["v"])
    frost.sdpa_forward(d["q"] + 1, d["k"], d["v"])
    assert (cache_stats().misses, cache_stats().hits) == (1, 1)
    frost.sdpa_forward(d["q"].transpose(1, 2).contiguous().transpose(1, 2), d["k"], d["v"])   # other strides
    frost.sdpa_forward(d["q"], d["k"], d["v"], causal=True)
    assert (cache_stats().misses, cache_stats().hits) == (3, 1)


def _args():
    d = _data(torch.float32)
    return d["q"], d["k"], d["v"]


@pytest.mark.parametrize("change, subject", [
    (lambda a, kw: ((a[0], a[1].double(), a[2]), kw), "k.dtype"),
    (lambda a, kw: ((a[0][0], a[1], a[2]), kw), "q.shape"),
    (lambda a, kw: ((a[0], a[1][:, :, :1], a[2]), kw), "v.shape"),
    (lambda a, kw: ((a[0], a[1], [1.0]), kw), "v"),
    (lambda a, kw: (a, kw | {"sink": torch.zeros(3)}), "sink.shape"),
    (lambda a, kw: (a, kw | {"sink": torch.zeros(HQ, dtype=torch.float64)}), "sink.dtype"),
    (lambda a, kw: (a, kw | {"seq_len_q": torch.zeros(B)}), "seq_len_q.dtype"),
    (lambda a, kw: (a, kw | {"seq_len_kv": torch.zeros(B + 1, dtype=torch.int32)}), "seq_len_kv.shape"),
    (lambda a, kw: (a, kw | {"softmax_scale": -1.0}), "softmax_scale"),
    (lambda a, kw: (a, kw | {"causal": "yes"}), "causal"),
    (lambda a, kw: (a, kw | {"window_size": 5}), "window_size"),
    (lambda a, kw: (a, kw | {"causal_alignment": "bottom-right"}), "causal_alignment"),
])
def test_errors_name_the_argument_as_the_caller_spelled_it(change, subject):
    args, kwargs = change(_args(), {})
    with pytest.raises(TensorError) as info:
        frost.sdpa_forward(*args, **kwargs)
    assert str(info.value).startswith(f"{subject}: got "), str(info.value)


def test_the_same_errors_as_sdpa_backward():
    q, k, v = _args()
    errors = []
    out, lse = frost.sdpa_forward(q, k, v)
    for call in (lambda: frost.sdpa_forward(q, k, v, window_size=("a", 1)),
                 lambda: frost.sdpa_backward(q, k, v, out, out, lse, window_size=("a", 1))):
        with pytest.raises(TensorError) as info:
            call()
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("b, sq, skv", [(0, 5, 5), (2, 0, 5), (2, 5, 0)])
def test_empty_problems_give_empty_outputs(b, sq, skv):
    q, k, v = torch.randn(b, sq, HQ, D), torch.randn(b, skv, HKV, D), torch.randn(b, skv, HKV, 8)
    sink = torch.randn(HQ)
    out, lse = frost.sdpa_forward(q, k, v, sink=sink, causal=True)
    assert out.shape == (b, sq, HQ, 8) and lse.shape == (b, HQ, sq) and lse.dtype == torch.float32
    assert not out.abs().sum()
    assert torch.equal(lse, sink.view(1, HQ, 1).expand(b, HQ, sq))     # no key: lse = the sink
    with pytest.raises(TensorError, match=r"^k\.shape"):
        frost.sdpa_forward(q, torch.randn(b, skv, 3, D), v)


def test_exported():
    from frost.api.functional import sdpa_forward

    assert "sdpa_forward" in frost.__all__ and frost.sdpa_forward is sdpa_forward
    assert "sdpa_forward_graph" in frost.__all__


def test_the_kernel_gets_the_callers_memory(kernel_engine):
    d = _data(torch.bfloat16)
    for _ in range(2):
        out, lse = frost.sdpa_forward(d["q"], d["k"], d["v"], causal=True, sink=d["sink"])
        call, options = kernel_engine.kernels[0].launches[-1]
        q, k, v, o, lse_arg = call.q, call.k, call.v, call.o, call.lse
        assert q is d["q"] and k is d["k"] and v is d["v"] and options["seq_major"]   # (B, S, H, D) as given
        assert o.data_ptr() == out.data_ptr() and lse_arg is lse and call.optional["sink"] is d["sink"]
    assert len(kernel_engine.kernels) == 1 and len(kernel_engine.kernels[0].launches) == 2
    assert cache_stats().hits == 1


def test_float32_falls_back_to_the_reference_engine(kernel_engine):
    d = _data(torch.float32)
    out, _ = frost.sdpa_forward(d["q"], d["k"], d["v"])
    assert not kernel_engine.kernels
    want, _ = frost.reference.attention_forward(*(d[n].transpose(1, 2) for n in ("q", "k", "v")))
    assert torch.equal(out, want.transpose(1, 2))
