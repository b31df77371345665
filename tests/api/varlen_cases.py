"""Packed (THD) test problems and their expected values from dense attention run on one sequence at a time.

A Case is a packed batch: per-sequence query and key lengths (zeros allowed), optional seqused, heads, head dims,
extra tokens past cu[-1], and the mask options. dense_expected runs the dense API (frost.attention, autograd) -- or
the fp64 oracle with its arguments -- on each sequence's (1, L, H, D) slice and scatters the outputs and gradients
back into packed tensors; that is what the varlen APIs must give."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

import frost
from helpers.oracle_api import masked_lse_loss
from helpers.tensors import cu_seqlens, int32


@dataclass(frozen=True)
class Case:
    lens_q: tuple[int, ...] = (5, 0, 7, 1)
    lens_kv: tuple[int, ...] = (6, 3, 7, 0)
    used_q: tuple[int, ...] | None = None
    used_kv: tuple[int, ...] | None = None
    hq: int = 4
    hkv: int = 2
    dqk: int = 8
    dv: int = 8
    extra_q: int = 0          # tokens past cu_seqlens_q[-1]
    extra_kv: int = 0
    sink: bool = False
    options: dict = field(default_factory=dict)   # causal, window_size, causal_alignment, softmax_scale


@dataclass
class Packed:
    """A case's tensors, fp64: q, k, v, dout, dlse, sink (or None), cu_q, cu_kv, seqused_q/kv, max_q, max_kv."""
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    dout: torch.Tensor
    dlse: torch.Tensor
    sink: torch.Tensor | None
    cu_q: torch.Tensor
    cu_kv: torch.Tensor
    seqused_q: torch.Tensor | None
    seqused_kv: torch.Tensor | None
    max_q: int
    max_kv: int

    def args(self) -> tuple:
        return (self.q, self.k, self.v, self.cu_q, self.cu_kv, self.max_q, self.max_kv)

    def extras(self) -> dict:
        return dict(seqused_q=self.seqused_q, seqused_kv=self.seqused_kv, sink=self.sink)


def make(case: Case, seed: int = 0, dtype=torch.float64) -> Packed:
    g = torch.Generator().manual_seed(seed)
    tq, tkv = sum(case.lens_q) + case.extra_q, sum(case.lens_kv) + case.extra_kv

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    return Packed(q=rand(tq, case.hq, case.dqk), k=rand(tkv, case.hkv, case.dqk), v=rand(tkv, case.hkv, case.dv),
                  dout=rand(tq, case.hq, case.dv), dlse=torch.randn(case.hq, tq, generator=g, dtype=torch.float64)
                  .float(), sink=rand(case.hq).float() if case.sink else None, cu_q=cu_seqlens(case.lens_q),
                  cu_kv=cu_seqlens(case.lens_kv), seqused_q=int32(case.used_q), seqused_kv=int32(case.used_kv),
                  max_q=max(case.lens_q, default=0), max_kv=max(case.lens_kv, default=0))


def dense_expected(case: Case, p: Packed, attention=frost.attention) -> dict:
    """out (Tq, Hq, Dv), lse (Hq, Tq), dq, dk, dv, dsink of loss = sum(out * dout) + sum(lse * dlse), computed by
    `attention` (frost.attention, or the fp64 oracle with its arguments: helpers.oracle_api.attention) on each
    sequence alone; zeros (lse -inf) for tokens outside every segment."""
    leaves = {n: getattr(p, n).detach().clone().requires_grad_() for n in ("q", "k", "v")}
    sink = None if p.sink is None else p.sink.detach().clone().requires_grad_()
    out = torch.zeros_like(p.dout)
    lse = torch.full(p.dlse.shape, float("-inf"), dtype=torch.float32)
    loss = sum((x * 0).sum() for x in (*leaves.values(), *([sink] if sink is not None else [])))   # no sequence: 0
    for b in range(len(case.lens_q)):
        sq, eq = int(p.cu_q[b]), int(p.cu_q[b + 1])
        skv, ekv = int(p.cu_kv[b]), int(p.cu_kv[b + 1])
        lengths = {}
        if p.seqused_q is not None:
            lengths["seq_len_q"] = p.seqused_q[b:b + 1]
        if p.seqused_kv is not None:
            lengths["seq_len_kv"] = p.seqused_kv[b:b + 1]
        o, l = attention(leaves["q"][sq:eq][None], leaves["k"][skv:ekv][None], leaves["v"][skv:ekv][None],
                         sink=sink, return_lse=True, **lengths, **case.options)
        out[sq:eq], lse[:, sq:eq] = o[0].detach(), l[0].detach()
        loss = loss + (o[0] * p.dout[sq:eq]).sum() + masked_lse_loss(l[0], p.dlse[:, sq:eq])
    grads = torch.autograd.grad(loss, [*leaves.values(), *([sink] if sink is not None else [])],
                                allow_unused=True, materialize_grads=True)
    dsink = grads[3] if sink is not None else None
    return dict(out=out, lse=lse, dq=grads[0], dk=grads[1], dv=grads[2], dsink=dsink)


def assert_matches(got: dict, want: dict) -> None:
    """Every present entry equal within fp64 rounding (the same dense reference math, summed in another order)."""
    for name, value in want.items():
        if value is None:
            assert got.get(name) is None, name
            continue
        torch.testing.assert_close(got[name], value, msg=lambda m, n=name: f"{n}: {m}")
