"""The custom ops pass torch.library.opcheck, and torch.compile(fullgraph=True) traces a model using frost.attention."""

import dataclasses
import re

import pytest
import torch
from torch.library import opcheck

from frost.api.autograd import attention
from frost.errors import TensorError

B, S, H, D = 2, 16, 4, 8


def _qkv(requires_grad=False, hkv=H):
    g = torch.Generator().manual_seed(0)
    shapes = ((B, S, H, D), (B, S, hkv, D), (B, S, hkv, D))
    return [torch.randn(s, generator=g).requires_grad_(requires_grad) for s in shapes]


@pytest.mark.parametrize("sink", [False, True])
def test_opcheck_attention_forward(sink):
    q, k, v = _qkv(requires_grad=True, hkv=2)
    s = torch.randn(H).requires_grad_() if sink else None
    lens = torch.tensor([S, 9], dtype=torch.int32)
    opcheck(torch.ops.frost.attention_forward.default,
            (q, k, v, None, None, 0, 0, lens, lens, s, None, True, 4, None, "bottom_right"))


def _layout(t, how):
    """The same values in another memory layout: "bshd" (as made), "bhsd" memory, or a slice of a packed buffer."""
    if how == "bhsd":
        return t.transpose(1, 2).contiguous().transpose(1, 2)
    if how == "packed":
        return torch.stack([t, t], dim=2)[:, :, 0]
    return t


@pytest.mark.parametrize("sink, layout", [(False, "bshd"), (True, "bshd"), (False, "bhsd"), (True, "packed")])
def test_opcheck_sdpa_backward(sink, layout):
    q, k, v = (_layout(t, layout) for t in _qkv())
    s = torch.randn(H) if sink else None
    out, lse = torch.ops.frost.attention_forward(q, k, v, None, None, 0, 0, None, None, s, 0.5, False, None, None,
                                                 "top_left")
    opcheck(torch.ops.frost.attention_backward.default,
            (q, k, v, out, torch.randn_like(out), lse, None, None, 0, 0, None, None, s, 0.5, False, None, None,
             "top_left", False))


class TinyBlock(torch.nn.Module):
    """Packed qkv projection -> frost.attention with a learnable sink and a sliding window -> output projection."""

    def __init__(self):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(H * D, 3 * H * D), torch.nn.Linear(H * D, H * D)
        self.sink = torch.nn.Parameter(torch.zeros(H))

    def forward(self, x):
        q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, H, D).unbind(2)
        o = attention(q, k, v, causal=True, window_size=(4, None), sink=self.sink)
        return self.out(o.reshape(x.shape[0], x.shape[1], H * D))


def test_torch_compile_fullgraph_matches_eager():
    torch.manual_seed(0)
    model, x = TinyBlock(), torch.randn(B, S, H * D)
    model(x).square().sum().backward()
    eager = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    y = compiled(x)
    y.square().sum().backward()
    assert torch.allclose(y, model(x))
    for got, want in zip((p.grad for p in model.parameters()), eager):
        assert torch.allclose(got, want, atol=1e-6)
    assert model.sink.grad.abs().sum() > 0


class GqaBlock(torch.nn.Module):
    """GQA (4:2) with padding, a sink and a band, whose loss uses both outputs of the forward (out and lse)."""

    def __init__(self):
        super().__init__()
        self.q, self.kv = torch.nn.Linear(H * D, H * D), torch.nn.Linear(H * D, 2 * 2 * D)
        self.sink = torch.nn.Parameter(torch.randn(H))

    def forward(self, x, lens):
        q = self.q(x).view(x.shape[0], x.shape[1], H, D)
        k, v = self.kv(x).view(x.shape[0], x.shape[1], 2, 2, D).unbind(2)
        out, lse = attention(q, k, v, window_size=(3, 2), causal_alignment="bottom_right", sink=self.sink,
                             seq_len_q=lens, seq_len_kv=lens, return_lse=True)
        return out.square().sum() + lse.clamp(min=-1e4).sum()


def test_torch_compile_fullgraph_with_gqa_padding_and_lse():
    torch.manual_seed(1)
    model, x, lens = GqaBlock(), torch.randn(B, S, H * D), torch.tensor([S, 11], dtype=torch.int32)
    model(x, lens).backward()
    eager = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    loss = torch.compile(model, fullgraph=True, backend="aot_eager")(x, lens)
    loss.backward()
    assert torch.allclose(loss, model(x, lens))
    for got, want in zip((p.grad for p in model.parameters()), eager):
        assert torch.allclose(got, want, atol=1e-5)


def _tensors_in(value) -> list:
    """Every torch.Tensor reachable from ``value`` through containers and dataclass fields."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors_in(item)]
    return []


def test_the_eager_node_keeps_tensors_only_as_saved_tensors():
    """Saved-tensor hooks (activation offloading, checkpointing) then see every tensor the backward reads, and the
    gradients through the hooks are those without them."""
    q, k, v = _qkv(requires_grad=True, hkv=2)
    sink, lens = torch.randn(H).requires_grad_(), torch.tensor([S, 9], dtype=torch.int32)
    kept = []

    def pack(t):
        kept.append(t.clone())
        return len(kept) - 1

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda i: kept[i]):
        out, lse = attention(q, k, v, causal=True, sink=sink, seq_len_q=lens, seq_len_kv=lens, return_lse=True)
    assert _tensors_in(vars(out.grad_fn)) == []
    (out.square().sum() + lse.clamp(min=-1e4).sum()).backward()
    hooked = [t.grad.clone() for t in (q, k, v, sink)]
    for t in (q, k, v, sink):
        t.grad = None
    out, lse = attention(q, k, v, causal=True, sink=sink, seq_len_q=lens, seq_len_kv=lens, return_lse=True)
    (out.square().sum() + lse.clamp(min=-1e4).sum()).backward()
    for got, want in zip(hooked, (q.grad, k.grad, v.grad, sink.grad)):
        assert torch.allclose(got, want, atol=1e-6)


def test_an_input_changed_in_place_after_the_forward_is_refused_by_the_backward():
    q, k, v = _qkv(requires_grad=True)
    q2 = q * 1
    out = attention(q2, k, v, causal=True)
    q2.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@pytest.mark.parametrize("kwargs, shown", [
    ({"causal": 1}, "ArgumentTypeError('causal', 1, 'True or False')"),
    ({"softmax_scale": -1.0}, "TensorError('softmax_scale', -1.0, 'None (1/sqrt(head dim of q)) or a float > 0"),
])
def test_a_bad_argument_in_compiled_code_is_named(kwargs, shown):
    """Under fullgraph=True a raise is torch's Unsupported error; it quotes frost's error with the argument, its
    value and what is accepted (frost's errors are built in a way torch.compile can trace). Without fullgraph the
    call falls back to eager and raises frost's own error."""
    torch._dynamo.reset()
    q = torch.randn(1, 8, 2, 16)
    with pytest.raises(Exception, match=re.escape(f"raised exception {shown}")):
        torch.compile(lambda q: attention(q, q, q, **kwargs), fullgraph=True, backend="eager")(q)
    torch._dynamo.reset()
    with pytest.raises(TensorError, match=rf"^{next(iter(kwargs))}: got "):
        torch.compile(lambda q: attention(q, q, q, **kwargs), backend="eager")(q)
