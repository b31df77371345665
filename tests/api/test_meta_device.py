"""Meta tensors (no data: shape inference, models built on the meta device) through every public call: the
outputs have the shapes, dtypes and strides the same call gives on real tensors, the checks of a first call still
run, and nothing is computed (no value is read)."""

from __future__ import annotations

import pytest
import torch

import frost

B, S, HQ, HKV, D = 2, 16, 4, 2, 32


def _pair(*shape, dtype=torch.bfloat16, grad=False):
    """The same tensor on the CPU (random values) and on the meta device."""
    cpu = torch.randn(*shape).to(dtype)
    meta = torch.empty(shape, dtype=dtype, device="meta")
    return cpu.requires_grad_(grad), meta.requires_grad_(grad)


def _same_layout(real: torch.Tensor, meta: torch.Tensor) -> None:
    assert meta.device.type == "meta"
    assert (meta.shape, meta.dtype, meta.stride()) == (real.shape, real.dtype, real.stride())


def test_functional_dense_calls_give_the_real_calls_outputs_on_meta():
    (q, mq), (k, mk), (v, mv) = _pair(B, S, HQ, D), _pair(B, S, HKV, D), _pair(B, S, HKV, D)
    lengths = torch.tensor([S, 5], dtype=torch.int32)
    opts = dict(causal=True, window_size=(4, None), sink=torch.zeros(HQ), seq_len_q=lengths, seq_len_kv=lengths)
    meta_opts = {n: t.to("meta") if isinstance(t, torch.Tensor) else t for n, t in opts.items()}
    out, lse = frost.sdpa_forward(q, k, v, **opts)
    mout, mlse = frost.sdpa_forward(mq, mk, mv, **meta_opts)
    for real, meta in ((out, mout), (lse, mlse)):
        _same_layout(real, meta)
    grads = frost.sdpa_backward(q, k, v, out, out, lse, **opts)
    meta_grads = frost.sdpa_backward(mq, mk, mv, mout, mout, mlse, **meta_opts)
    for real, meta in zip(grads, meta_grads):
        _same_layout(real, meta)


def test_functional_packed_calls_give_the_real_calls_outputs_on_meta():
    (q, mq), (k, mk) = _pair(S, HQ, D), _pair(S, HKV, D)
    cu = torch.tensor([0, 6, S], dtype=torch.int32)
    out, lse = frost.sdpa_forward_varlen(q, k, k, cu, cu, 10, 10, causal=True)
    mout, mlse = frost.sdpa_forward_varlen(mq, mk, mk, cu.to("meta"), cu.to("meta"), 10, 10, causal=True)
    _same_layout(out, mout)
    _same_layout(lse, mlse)
    grads = frost.sdpa_backward_varlen(q, k, k, out, out, lse, cu, cu, 10, 10, causal=True)
    meta_grads = frost.sdpa_backward_varlen(mq, mk, mk, mout, mout, mlse, cu.to("meta"), cu.to("meta"), 10, 10,
                                            causal=True)
    for real, meta in zip(grads[:3], meta_grads[:3]):
        _same_layout(real, meta)


def test_attention_forward_and_backward_on_meta():
    (q, mq), (k, mk), (v, mv) = (_pair(B, S, h, D, grad=True) for h in (HQ, HKV, HKV))
    (sink, msink) = _pair(HQ, dtype=torch.float32, grad=True)
    frost.attention(q, k, v, causal=True, sink=sink).float().sum().backward()
    mout = frost.attention(mq, mk, mv, causal=True, sink=msink)
    mout.float().sum().backward()
    for real, meta in ((q.grad, mq.grad), (k.grad, mk.grad), (v.grad, mv.grad), (sink.grad, msink.grad)):
        _same_layout(real, meta)


def test_meta_calls_are_checked_like_real_ones():
    mq = torch.empty(B, S, HQ, D, dtype=torch.bfloat16, device="meta")
    bad_k = torch.empty(B, S, 3, D, dtype=torch.bfloat16, device="meta")
    with pytest.raises(frost.TensorError, match=r"^k\.shape: .*Hkv a divisor of Hq = 4"):
        frost.sdpa_forward(mq, bad_k, bad_k)
    with pytest.raises(frost.TensorError, match=r"^k\.device: got 'cpu'; accepted: meta"):
        frost.sdpa_forward(mq, torch.randn(B, S, HQ, D).bfloat16(), mq)
    with pytest.raises(frost.TensorError, match=r"^window_size"):
        frost.sdpa_forward(mq, mq, mq, window_size=(1, 2, 3))


def test_a_plan_executes_meta_tensors_without_computing():
    """plan.execute on meta tensors checks them and gives its outputs' shapes, as the functional calls do (the
    reference engine read values back and failed inside torch)."""
    graph = frost.sdpa_backward_graph(B, HQ, S, D, heads_kv=HKV, sink=True, padded=True)
    plan = frost.compile(graph, target="cpu")
    real = plan.new_outputs("cpu")
    inputs = {s.name: torch.empty(s.shape, dtype=getattr(torch, s.dtype), device="meta") for s in graph.tensors
              if s.name not in real}
    out = plan.execute(inputs)
    assert set(out) == set(real)
    for name, t in out.items():
        _same_layout(real[name], t)
    with pytest.raises(frost.TensorError, match="^tensor 'q'"):
        plan.execute({**inputs, "q": inputs["q"][..., :8]})
