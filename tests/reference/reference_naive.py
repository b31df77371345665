"""The test oracle's oracle: a naive fp64 attention forward written for clarity, not speed — full S×S scores,
a mask built by explicit loops straight from DESIGN.md, the sink as one extra logit column, padded and empty
rows zeroed. torch.autograd through it gives the gradients the reference backward must reproduce."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


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
        """Keyword arguments of frost.reference.attention_forward/backward."""
        lens = lambda x: None if x is None else torch.tensor(x, dtype=torch.int32)  # noqa: E731
        return dict(scale=self.scale, causal=self.causal, alignment=self.alignment, band_left=self.band_left,
                    band_right=self.band_right, seq_len_q=lens(self.seq_len_q), seq_len_kv=lens(self.seq_len_kv),
                    sink=self.sink)


def naive_mask(case: Case) -> torch.Tensor:
    """(B, Sq, Skv) bool, one entry at a time."""
    b_, _, sq_full, _ = case.q.shape
    skv_full = case.k.shape[2]
    right = case.band_right if case.band_right is not None else (0 if case.causal else None)
    keep = torch.zeros(b_, sq_full, skv_full, dtype=torch.bool)
    for b in range(b_):
        sq = case.seq_len_q[b] if case.seq_len_q is not None else sq_full
        skv = case.seq_len_kv[b] if case.seq_len_kv is not None else skv_full
        for i in range(sq):
            diag = i if case.alignment == "top_left" else i + (skv - sq)
            for j in range(skv):
                if case.band_left is not None and j < diag - case.band_left:
                    continue
                if right is not None and j > diag + right:
                    continue
                keep[b, i, j] = True
    return keep


def naive_forward(case: Case, q, k, v, sink) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(O, LSE, P) differentiable in q, k, v, sink; P (B, Hq, Sq, Skv [+1 sink column]) is the softmax.
    Padded rows and rows with neither key nor sink: O = 0, P = 0 and LSE = −∞, with constant logits so
    autograd sees no dependence (and no NaN)."""
    b_, hq, sq_full, d = q.shape
    group = hq // k.shape[1]
    scale = case.scale if case.scale is not None else 1.0 / math.sqrt(d)
    kx, vx = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    keep = naive_mask(case)[:, None]  # (B, 1, Sq, Skv)
    logits = (scale * torch.einsum("bhid,bhjd->bhij", q, kx)).masked_fill(~keep, -math.inf)
    rows = torch.zeros(b_, 1, sq_full, dtype=torch.bool)
    for b in range(b_):
        rows[b, 0, : (case.seq_len_q[b] if case.seq_len_q is not None else sq_full)] = True
    live = rows & (keep.any(-1) | (sink is not None))
    if sink is not None:
        logits = torch.cat([logits, sink.view(1, hq, 1, 1).expand(b_, hq, sq_full, 1)], dim=-1)
    logits = torch.where(live[..., None], logits, torch.zeros_like(logits))
    lse = torch.logsumexp(logits, dim=-1)
    prob = torch.exp(logits - lse[..., None]) * live[..., None]
    o = prob[..., : kx.shape[2]] @ vx
    return o, lse.masked_fill(~live, -math.inf), prob


def autograd_reference(case: Case) -> dict[str, torch.Tensor | None]:
    """O, LSE, P of the naive forward and the gradients of Σ O·dO with respect to q, k, v, sink."""
    leaves = [t.detach().clone().requires_grad_(True) if t is not None else None
              for t in (case.q, case.k, case.v, case.sink)]
    o, lse, prob = naive_forward(case, *leaves)
    (o * case.do).sum().backward()
    # a leaf the loss does not reach (everything masked) has a zero gradient, not None
    grads = [None if t is None else (t.grad if t.grad is not None else torch.zeros_like(t)) for t in leaves]
    return dict(o=o.detach(), lse=lse.detach(), prob=prob.detach(),
                dq=grads[0], dk=grads[1], dv=grads[2], dsink=grads[3])


def magnitudes(case: Case, prob: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-element sums of |terms| behind each output (the backward formulas with every factor replaced by
    its absolute value). Rounding error is relative to these, not to the (possibly cancelled) result, so
    `|actual − expected| <= tol · magnitude` is a fair and strict test even where a gradient is ~0."""
    b_, hq, sq, d = case.q.shape
    hkv, skv = case.k.shape[1], case.k.shape[2]
    group = hq // hkv
    scale = case.scale if case.scale is not None else 1.0 / math.sqrt(d)
    p_keys = prob[..., :skv]
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
        out["dsink"] = (prob[..., skv] * delta).sum(dim=(0, 2))
    return out
