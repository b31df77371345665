"""Double backward (create_graph=True, then a backward through the gradients) through frost.attention: the reference
engine's backward is made of torch ops, so its gradients are differentiable and the second-order terms match eager
math; the kernel engine's are not, and differentiating them raises instead of silently contributing nothing."""

from __future__ import annotations

import math

import pytest
import torch

import frost

B, S, HQ, HKV, D = 1, 8, 4, 2, 16


def _leaves(dtype):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(B, S, h, D, generator=g, dtype=dtype).requires_grad_() for h in (HQ, HKV, HKV)]


def _penalised(attention, q, k, v):
    """A gradient penalty: loss + |d loss / d q|^2, whose backward differentiates the attention backward."""
    loss = attention(q, k, v).square().sum()
    (gq,) = torch.autograd.grad(loss, q, create_graph=True)
    (loss + gq.square().sum()).backward()
    return q.grad, k.grad, v.grad


def _eager(q, k, v):
    g = HQ // HKV
    qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2).repeat_interleave(g, 1), v.transpose(1, 2).repeat_interleave(g, 1)
    s = (qh @ kh.transpose(-1, -2)) / math.sqrt(D)
    s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    return (s.softmax(-1) @ vh).transpose(1, 2)


def test_the_reference_engine_gives_second_order_gradients():
    want = _penalised(_eager, *_leaves(torch.float64))
    got = _penalised(lambda q, k, v: frost.attention(q, k, v, causal=True), *_leaves(torch.float64))
    for w, g in zip(want, got):
        # the lse is fp32 by contract: the backward's probabilities carry its rounding
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_differentiating_the_kernel_gradients_raises(kernel_engine):
    q, k, v = (t.detach().bfloat16().requires_grad_() for t in _leaves(torch.float32))
    sink = torch.zeros(HQ, requires_grad=True)
    loss = frost.attention(q, k, v, causal=True, sink=sink).float().square().sum()
    gq, gsink = torch.autograd.grad(loss, (q, sink), create_graph=True)   # asking for the graph is allowed
    with pytest.raises(frost.NotSupported, match=r"^double backward: the gradients of frost\.attention's CUDA"):
        (gq.float().square().sum() + gsink.sum()).backward()


def test_the_guard_holds_when_only_k_is_trained(kernel_engine):
    q, v = (t.detach().bfloat16() for t in _leaves(torch.float32)[::2])
    k = _leaves(torch.float32)[1].detach().bfloat16().requires_grad_()
    (gk,) = torch.autograd.grad(frost.attention(q, k, v).float().square().sum(), k, create_graph=True)
    with pytest.raises(frost.NotSupported, match=r"^double backward"):
        gk.float().sum().backward()


def test_a_plain_backward_on_the_kernel_engine_is_untouched(kernel_engine):
    q, k, v = (t.detach().bfloat16().requires_grad_() for t in _leaves(torch.float32))
    frost.attention(q, k, v, causal=True).float().sum().backward()
    assert q.grad is not None and q.grad.grad_fn is None


@pytest.mark.gpu
def test_differentiating_the_cuda_kernel_gradients_raises():
    q, k, v = (t.detach().to("cuda", torch.bfloat16).requires_grad_() for t in _leaves(torch.float32))
    loss = frost.attention(q, k, v, causal=True).float().square().sum()
    (gq,) = torch.autograd.grad(loss, q, create_graph=True)
    with pytest.raises(frost.NotSupported, match=r"^double backward"):
        gq.float().square().sum().backward()
    q.grad = None
    frost.attention(q, k, v, causal=True).float().sum().backward()   # a plain backward is untouched
    assert q.grad is not None and q.grad.grad_fn is None
