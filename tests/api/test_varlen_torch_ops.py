"""The packed custom ops pass torch.library.opcheck, and torch.compile(fullgraph=True) traces a model using
frost.attention_varlen (max_seqlen as int arguments) with the eager model's values and gradients."""

from __future__ import annotations

import pytest
import torch
from torch.library import opcheck

import frost
from helpers.tensors import cu_seqlens

H, HKV, D = 4, 2, 8
LENS = (5, 0, 9, 2)


def _cu():
    return cu_seqlens(LENS)


def _qkv(t=sum(LENS), requires_grad=False):
    g = torch.Generator().manual_seed(0)
    shapes = ((t, H, D), (t, HKV, D), (t, HKV, D))
    return [torch.randn(s, generator=g).requires_grad_(requires_grad) for s in shapes]


@pytest.mark.parametrize("sink", [False, True])
def test_opcheck_attention_varlen_forward(sink):
    q, k, v = _qkv(requires_grad=True)
    s = torch.randn(H).requires_grad_() if sink else None
    used = torch.tensor([4, 0, 9, 1], dtype=torch.int32)
    opcheck(torch.ops.frost.attention_forward.default,
            (q, k, v, _cu(), _cu(), max(LENS), max(LENS), used, None, s, None, True, 3, None, "bottom_right"))


@pytest.mark.parametrize("sink, token_major_lse", [(False, False), (True, True)])
def test_opcheck_sdpa_backward_varlen(sink, token_major_lse):
    q, k, v = _qkv(t=sum(LENS) + 2)   # two tokens past cu[-1]
    s = torch.randn(H) if sink else None
    out, lse = torch.ops.frost.attention_forward(q, k, v, _cu(), _cu(), 9, 9, None, None, s, 0.5, False,
                                                        None, None, "top_left")
    if token_major_lse:
        lse = lse.t().contiguous().t()
    opcheck(torch.ops.frost.attention_backward.default,
            (q, k, v, out, torch.randn_like(out), lse, _cu(), _cu(), 9, 9, None, None, s, 0.5, False, None, None,
             "top_left", False))


class PackedBlock(torch.nn.Module):
    """A packed qkv projection over (T, H·D) tokens -> frost.attention_varlen with a learnable sink, GQA and a
    causal sliding window -> output projection; the loss uses out and lse."""

    def __init__(self):
        super().__init__()
        self.q, self.kv = torch.nn.Linear(H * D, H * D), torch.nn.Linear(H * D, 2 * HKV * D)
        self.out = torch.nn.Linear(H * D, H * D)
        self.sink = torch.nn.Parameter(torch.randn(H))

    def forward(self, x, cu, max_seqlen: int):
        q = self.q(x).view(x.shape[0], H, D)
        k, v = self.kv(x).view(x.shape[0], 2, HKV, D).unbind(1)
        o, lse = frost.attention_varlen(q, k, v, cu, cu, max_seqlen, max_seqlen, causal=True, window_size=(3, None),
                                        sink=self.sink, return_lse=True)
        return self.out(o.reshape(x.shape[0], H * D)).square().sum() + lse.clamp(min=-1e4).sum()


def test_torch_compile_fullgraph_matches_eager():
    torch.manual_seed(0)
    model, x, cu = PackedBlock(), torch.randn(sum(LENS) + 1, H * D), _cu()
    model(x, cu, max(LENS)).backward()
    eager = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    loss = torch.compile(model, fullgraph=True, backend="aot_eager")(x, cu, max(LENS))
    loss.backward()
    assert torch.allclose(loss, model(x, cu, max(LENS)))
    for got, want in zip((p.grad for p in model.parameters()), eager):
        assert torch.allclose(got, want, atol=1e-5)
    assert model.sink.grad.abs().sum() > 0
