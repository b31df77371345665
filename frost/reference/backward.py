"""Reference backward: dQ, dK, dV and dSink from the saved O and LSE, one query block at a time.

Per block (all batches and heads): recompute P from the saved LSE, then dV += Pᵀ·dO, dP = dO·Vᵀ,
dS = P∘(dP − Δ), dQ = scale·dS·K, dK += scale·dSᵀ·Q and dSink −= Σ exp(sink − LSE)·Δ, with
Δ = rowsum(dO∘O) − dLSE: a gradient dLSE on the forward's LSE output adds dLSE·∂LSE/∂S = dLSE·P to dS (and
dLSE·exp(sink − LSE) to dSink), which is the same as lowering Δ by dLSE.
Padded query rows are zeroed before use, so garbage (even NaN) in their O, dO or LSE reaches no output. dS is
selected to exactly 0 on masked entries (a NaN Δ_i or dP_ij there is never multiplied in), and every sum over
rows or keys runs over kept entries only (scores.kept_matmul), so a NaN reaches exactly the gradients whose
formula reads it. dSink's weight exp(sink − LSE) takes its limits (scores.sink_weight)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from frost.reference import mask as masks
from frost.reference.blocks import block_rows_for, empty_like_layout, grouped_rows, row_blocks
from frost.reference.inputs import ReferenceProblem, check_backward_tensors, resolve
from frost.reference.numerics import as_operand
from frost.reference.scores import kept_matmul, masked_scores, probabilities, sink_weight


@dataclass
class _Grads:
    """Accumulators in the compute dtype; dK/dV sum over blocks and over each GQA group in a fixed order."""

    dq: torch.Tensor     # (B, Hq, Sq, Dqk)
    dk: torch.Tensor     # (B, Hkv, Skv, Dqk)
    dv: torch.Tensor     # (B, Hkv, Skv, Dv)
    dsink: torch.Tensor  # (Hkv, G)


def _group_sum_t(a: torch.Tensor, b: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Σ over group and kept rows of aᵀ·b for (B, Hkv, G, rows, Skv) and (B, Hkv, G, rows, Y): one matmul whose
    reduction runs over the whole group, giving (B, Hkv, Skv, Y). `keep` (B, rows, Skv): a row adds nothing to
    the keys it does not attend, even where its b is NaN."""
    bs, hkv, g, r, skv = a.shape
    a, b = a.reshape(bs, hkv, g * r, skv), b.reshape(bs, hkv, g * r, b.shape[-1])

    def keep_t() -> torch.Tensor:
        return keep[:, None, None].expand(bs, 1, g, r, skv).reshape(bs, 1, g * r, skv).transpose(-1, -2)

    return kept_matmul(a.transpose(-1, -2), b, keep_t)


def _live(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """x with padded rows set to exactly 0 (rows: (B, 1, 1, rows) bool, broadcast over trailing dims)."""
    rows = rows.view(*rows.shape, *([1] * (x.dim() - rows.dim())))
    return torch.where(rows, x, torch.zeros((), dtype=x.dtype, device=x.device))


def _block(p: ReferenceProblem, t: dict, sink: torch.Tensor | None, acc: _Grads, i0: int, i1: int) -> None:
    """Accumulate the gradients of query rows [i0, i1) into `acc`."""
    cd, io, hkv = p.compute_dtype, p.io_dtype, p.heads_kv
    keep = masks.block_mask(p.mask, i0, i1, p.seq_kv)
    rows = masks.row_valid(p.mask, i0, i1)[:, None, None]
    q = grouped_rows(t["q"], hkv, i0, i1, cd)
    do = _live(grouped_rows(t["do"], hkv, i0, i1, cd), rows)
    delta = (do * _live(grouped_rows(t["o"], hkv, i0, i1, cd), rows)).sum(-1)
    if "dlse" in t:
        delta = delta - _live(grouped_rows(t["dlse"], hkv, i0, i1, cd), rows)
    lse = grouped_rows(t["lse"], hkv, i0, i1, cd)
    prob = probabilities(masked_scores(q, t["k"], p.scale, keep), lse, keep)
    acc.dv += _group_sum_t(as_operand(prob, io), do, keep)
    kept = keep[:, None, None]
    ds = prob * (torch.matmul(do, t["v"].transpose(-1, -2)) - delta[..., None])
    ds = as_operand(torch.where(kept, ds, torch.zeros((), dtype=ds.dtype, device=ds.device)), io)
    dq = kept_matmul(ds, t["k"], lambda: kept) * p.scale
    acc.dq[:, :, i0:i1] = dq.reshape(p.batch, p.heads_q, i1 - i0, p.dim_qk)
    acc.dk += _group_sum_t(ds, q, keep) * p.scale
    if sink is not None:
        weight = _live(sink_weight(sink, lse), rows)
        acc.dsink -= (weight * delta).sum(dim=(0, 3))


def _finish(x: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The accumulator cast to `dtype`, laid out in memory like `ref`."""
    out = empty_like_layout(ref, tuple(x.shape), dtype)
    out.copy_(x)
    return out


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, do: torch.Tensor,
                       lse: torch.Tensor, *, scale: float | None = None, causal: bool = False,
                       alignment: str = "top_left", band_left: int | None = None, band_right: int | None = None,
                       seq_len_q: torch.Tensor | None = None, seq_len_kv: torch.Tensor | None = None,
                       sink: torch.Tensor | None = None, dlse: torch.Tensor | None = None,
                       block_rows: int | None = None,
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Attention backward on logical BHSD tensors (any strides). Returns dQ, dK, dV in q's dtype and in the
    memory order of q, k, v, and dSink (Hq,) (fp32, or fp64 for fp64 inputs) or None without a sink.
    `lse` must include the sink term, as attention_forward returns it. `dlse` (B, Hq, Sq): the gradient on that
    LSE output when the loss uses it (None: zero)."""
    p = resolve(q, k, v, scale=scale, causal=causal, alignment=alignment, band_left=band_left,
                band_right=band_right, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv, sink=sink)
    check_backward_tensors(p, q, o, do, lse, dlse)
    cd, g = p.compute_dtype, p.group
    t = {"q": q, "o": o, "do": do, "lse": lse, "k": k.to(cd).unsqueeze(2), "v": v.to(cd).unsqueeze(2)}
    if dlse is not None:
        t["dlse"] = dlse
    sink_c = sink.to(cd).view(1, p.heads_kv, g, 1) if sink is not None else None
    acc = _Grads(dq=torch.zeros((p.batch, p.heads_q, p.seq_q, p.dim_qk), dtype=cd, device=q.device),
                 dk=torch.zeros((p.batch, p.heads_kv, p.seq_kv, p.dim_qk), dtype=cd, device=q.device),
                 dv=torch.zeros((p.batch, p.heads_kv, p.seq_kv, p.dim_v), dtype=cd, device=q.device),
                 dsink=torch.zeros((p.heads_kv, g), dtype=cd, device=q.device))
    rows = block_rows_for(p.batch, p.heads_q, p.seq_q, p.seq_kv, block_rows)
    for i0, i1 in row_blocks(p.seq_q, rows):
        _block(p, t, sink_c, acc, i0, i1)
    dsink = acc.dsink.reshape(p.heads_q) if sink is not None else None
    return _finish(acc.dq, q, p.io_dtype), _finish(acc.dk, k, p.io_dtype), _finish(acc.dv, v, p.io_dtype), dsink
