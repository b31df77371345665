"""The reference engine's test problems and what they must give: a Case holds fp64 BHSD tensors and the mask
options; expected() is the fp64 oracle's answer (helpers/oracle.py: its forward, and torch.autograd through it for
the gradients the reference backward must reproduce); magnitudes() bounds the rounding a correct engine may show."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from helpers import oracle


@dataclass
class Case:
    """One attention problem; tensors are fp64 BHSD (possibly strided views)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    do: torch.Tensor
    sink: torch.Tensor | None = None
    seq_len_q: list[int] | None = None
    seq_len_kv: list[int] | None = None
    scale: float | None = None
    causal: bool = False
    alignment: str = "top_left"
    band_left: int | None = None
    band_right: int | None = None
    extra: dict = field(default_factory=dict)

    def kwargs(self) -> dict:
        """Keyword arguments of frost.reference.attention_forward/backward (and of the oracle)."""
        lens = lambda x: None if x is None else torch.tensor(x, dtype=torch.int32)  # noqa: E731
        return dict(scale=self.scale, causal=self.causal, alignment=self.alignment, band_left=self.band_left,
                    band_right=self.band_right, seq_len_q=lens(self.seq_len_q), seq_len_kv=lens(self.seq_len_kv),
                    sink=self.sink)


def expected(case: Case) -> dict[str, torch.Tensor | None]:
    """The oracle's O, LSE, P (B, Hq, Sq, Skv), the sink's share of P (or None) and the gradients of sum(O * dO)
    with respect to q, k, v, sink (autograd through the oracle's forward)."""
    kw = case.kwargs()
    sink = kw.pop("sink")
    want = oracle.autograd_backward(case.q, case.k, case.v, case.do, sink=sink, **kw)
    prob, prob_sink, _ = oracle.softmax(case.q, case.k, sink=sink, **kw)
    return want | dict(prob=prob, prob_sink=prob_sink)


def magnitudes(case: Case, want: dict) -> dict[str, torch.Tensor]:
    """Per-element sums of |terms| behind each output (the backward formulas with every factor replaced by
    its absolute value). Rounding error is relative to these, not to the (possibly cancelled) result, so
    `|actual − expected| <= tol · magnitude` is a fair and strict test even where a gradient is ~0."""
    b_, hq, sq, d = case.q.shape
    hkv = case.k.shape[1]
    group = hq // hkv
    scale = case.scale if case.scale is not None else 1.0 / math.sqrt(d)
    p_keys = want["prob"]
    ak, av = case.k.abs().repeat_interleave(group, 1), case.v.abs().repeat_interleave(group, 1)
    ado = case.do.abs()
    dp = ado @ av.transpose(-1, -2)
    delta = (ado * (p_keys @ av)).sum(-1)
    ds = p_keys * (dp + delta[..., None])
    per_group = lambda x: x.reshape(b_, hkv, group, *x.shape[2:]).sum(2)  # noqa: E731
    out = dict(o=p_keys @ av, dq=scale * ds @ ak,
               dk=per_group(scale * ds.transpose(-1, -2) @ case.q.abs()),
               dv=per_group(p_keys.transpose(-1, -2) @ ado), dsink=None)
    if case.sink is not None:
        out["dsink"] = (want["prob_sink"] * delta).sum(dim=(0, 2))
    return out
