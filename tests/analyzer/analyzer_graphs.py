"""Graph builders for the analyzer tests: one baseline that cute_sm120 serves on sm_120, and variants of it that
each break exactly one rule."""

from __future__ import annotations

from frost.ir import GraphBuilder, sdpa_backward_graph
from frost.ir.tensors import contiguous_strides

B, H, S, D = 2, 8, 256, 64


def baseline(**kw):
    """bf16, MHA, D=64, causal top-left, BSHD, no padding/sink: served by cute_sm120 on sm_120."""
    return sdpa_backward_graph(B, H, S, kw.pop("head_dim", D), **{"causal": True, **kw})


def gpt_oss():
    return sdpa_backward_graph(2, 64, 4096, 64, heads_kv=8, sink=True, padded=True, causal=True,
                               alignment="bottom_right", band_left=128)


def permuted_strides(shape, order):
    """Strides of a logical (B, H, S, D) tensor stored with its dims in memory order `order` (outermost first)."""
    mem = contiguous_strides(tuple(shape[i] for i in order))
    out = [0] * len(shape)
    for pos, dim in enumerate(order):
        out[dim] = mem[pos]
    return tuple(out)


def pitched_strides(shape, pitch):
    """BSHD strides with each head-dim row padded to `pitch` elements."""
    b, h, s, d = shape
    return (s * h * pitch, pitch, h * pitch, 1)


def custom(dqk=D, dv=D, dtype="bfloat16", strides=None, heads_kv=H, **op):
    """A one-op graph whose io tensors take `strides(shape)` (a function) when given."""
    g = GraphBuilder("custom")
    shapes = {"q": (B, H, S, dqk), "k": (B, heads_kv, S, dqk), "v": (B, heads_kv, S, dv),
              "o": (B, H, S, dv), "do": (B, H, S, dv)}
    names = {n: g.tensor(n, s, dtype, layout="bshd", strides=strides(s) if strides else None)
             for n, s in shapes.items()}
    lse = g.tensor("lse", (B, H, S), "float32")
    g.sdpa_backward(names["q"], names["k"], names["v"], names["o"], names["do"], lse, name="attn", **op)
    return g.build()
