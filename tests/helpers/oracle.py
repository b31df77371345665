"""The suite's fp64 attention oracle: DESIGN.md's math written out densely -- the whole (Sq, Skv) score matrix of
every (batch, head), an explicit keep mask, the sink as one more logit column -- and independent of frost.reference,
which it checks.

attention_forward and attention_backward take frost.reference's arguments (logical BHSD tensors of any dtype,
device and strides; the math runs in fp64), so a test swaps one for the other. The backward applies DESIGN.md's
gradient formulas to the O and LSE it is given, as a kernel does; autograd through attention_forward gives the same
gradients (tests/reference/test_oracle.py holds the two together). Inputs are finite; a sink of -inf is no sink."""

from __future__ import annotations

import math

import torch

ALIGNMENTS = ("top_left", "bottom_right")


def as_ints(values) -> list[int]:
    """A tensor (on any device) or a sequence of ints as a list of ints."""
    return [int(x) for x in (values.tolist() if isinstance(values, torch.Tensor) else values)]


def lengths(values, batch: int, full: int) -> list[int]:
    """Per-batch lengths: `values` (a tensor, a list, or None: `full` for every batch)."""
    return [full] * batch if values is None else as_ints(values)


def keep_mask(batch: int, sq: int, skv: int, *, causal: bool = False, alignment: str = "top_left",
              band_left: int | None = None, band_right: int | None = None, seq_len_q=None, seq_len_kv=None,
              device="cpu") -> torch.Tensor:
    """(B, Sq, Skv) bool: key j is visible from query row i of batch b. Row i is valid iff i < sq_b and key j iff
    j < skv_b; the diagonal is j = i (top-left) or j = i + skv_b - sq_b (bottom-right); the band keeps
    j in [diag - band_left, diag + band_right], an absent bound being unbounded, except that causal makes an absent
    right bound 0 (causal = (None, 0); causal with a right bound widens it)."""
    assert alignment in ALIGNMENTS, alignment
    lq = torch.tensor(lengths(seq_len_q, batch, sq), device=device).view(-1, 1, 1)
    lkv = torch.tensor(lengths(seq_len_kv, batch, skv), device=device).view(-1, 1, 1)
    i = torch.arange(sq, device=device).view(1, -1, 1)
    j = torch.arange(skv, device=device).view(1, 1, -1)
    diag = i if alignment == "top_left" else i + (lkv - lq)
    right = band_right if band_right is not None else (0 if causal else None)
    keep = (i < lq) & (j < lkv)
    if band_left is not None:
        keep = keep & (j >= diag - band_left)
    if right is not None:
        keep = keep & (j <= diag + right)
    return keep


def valid_rows(batch: int, sq: int, seq_len_q=None, device="cpu") -> torch.Tensor:
    """(B, Sq) bool: query rows inside each batch's length."""
    lq = torch.tensor(lengths(seq_len_q, batch, sq), device=device).view(-1, 1)
    return torch.arange(sq, device=device).view(1, -1) < lq


def _per_query_head(t: torch.Tensor, heads_q: int) -> torch.Tensor:
    """A kv-head tensor (B, Hkv, S, D) in fp64, repeated so that query head h reads kv head h // G."""
    return t.double().repeat_interleave(heads_q // t.shape[1], dim=1)


def _sum_groups(t: torch.Tensor, heads_kv: int) -> torch.Tensor:
    """(B, Hq, S, D) per query head -> (B, Hkv, S, D): each kv head's gradient sums over its group."""
    b, hq = t.shape[:2]
    return t.reshape(b, heads_kv, hq // heads_kv, *t.shape[2:]).sum(2)


def _setup(q, k, scale, mask):
    b, hq, sq, d = q.shape
    assert hq % k.shape[1] == 0, (q.shape, k.shape)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    keep = keep_mask(b, sq, k.shape[2], device=q.device, **mask)[:, None]          # (B, 1, Sq, Skv)
    scores = scale * q.double() @ _per_query_head(k, hq).transpose(-1, -2)
    return scale, keep, scores


def softmax(q, k, *, scale=None, sink=None, causal=False, alignment="top_left", band_left=None, band_right=None,
            seq_len_q=None, seq_len_kv=None):
    """(P (B, Hq, Sq, Skv), the sink's share (B, Hq, Sq) or None, LSE (B, Hq, Sq)), fp64, differentiable in q, k
    and sink. A row that is padded or sees neither a key nor a (finite or +) sink has P = 0 and LSE = -inf; its
    logits are replaced by constants first, so autograd finds no dependence there (and no NaN)."""
    mask = dict(causal=causal, alignment=alignment, band_left=band_left, band_right=band_right,
                seq_len_q=seq_len_q, seq_len_kv=seq_len_kv)
    b, hq, sq, _ = q.shape
    _, keep, scores = _setup(q, k, scale, mask)
    logits = scores.masked_fill(~keep, -math.inf)
    live = keep.any(-1) & valid_rows(b, sq, seq_len_q, q.device)[:, None]           # (B, 1, Sq)
    if sink is not None:
        sink64 = sink.double().view(1, hq, 1)
        live = live | (valid_rows(b, sq, seq_len_q, q.device)[:, None] & (sink64 > -math.inf))
        logits = torch.cat([logits, sink64[..., None].expand(b, hq, sq, 1)], dim=-1)
    live = live.expand(b, hq, sq)
    logits = torch.where(live[..., None], logits, torch.zeros_like(logits))
    lse = torch.logsumexp(logits, dim=-1)
    prob = torch.where(live[..., None], torch.exp(logits - lse[..., None]), torch.zeros_like(logits))
    lse = lse.masked_fill(~live, -math.inf)
    skv = k.shape[2]
    return prob[..., :skv], (prob[..., skv] if sink is not None else None), lse


def attention_forward(q, k, v, *, scale=None, sink=None, causal=False, alignment="top_left", band_left=None,
                      band_right=None, seq_len_q=None, seq_len_kv=None):
    """O (B, Hq, Sq, Dv) and LSE (B, Hq, Sq), fp64: O_i = sum_j P_ij V_j, LSE_i = log(sum_j exp(s_ij) + exp(sink_h))
    over the visible keys; padded rows and rows that see nothing get O = 0, LSE = -inf (a valid row with a sink but
    no key: LSE = sink). Differentiable in q, k, v and sink."""
    prob, _, lse = softmax(q, k, scale=scale, sink=sink, causal=causal, alignment=alignment, band_left=band_left,
                           band_right=band_right, seq_len_q=seq_len_q, seq_len_kv=seq_len_kv)
    return prob @ _per_query_head(v, q.shape[1]), lse


def attention_backward(q, k, v, o, do, lse, *, scale=None, sink=None, dlse=None, causal=False, alignment="top_left",
                       band_left=None, band_right=None, seq_len_q=None, seq_len_kv=None):
    """dQ, dK, dV and dSink (or None) in fp64 from DESIGN.md's formulas on the given O and LSE: P_ij =
    exp(s_ij - LSE_i) on visible keys, delta_i = sum_d dO_id O_id, dS = P (dP - delta + dlse), dV = P^T dO,
    dQ = scale dS K, dK = scale dS^T Q (dK and dV summed over each GQA group), dsink_h = sum over valid rows of
    exp(sink_h - LSE_i) (dlse_i - delta_i). Padded rows and keys read nothing (whatever O, dO, LSE hold there) and
    get exact zeros."""
    mask = dict(causal=causal, alignment=alignment, band_left=band_left, band_right=band_right,
                seq_len_q=seq_len_q, seq_len_kv=seq_len_kv)
    b, hq, sq, _ = q.shape
    hkv = k.shape[1]
    scale, keep, scores = _setup(q, k, scale, mask)
    rows = valid_rows(b, sq, seq_len_q, q.device)[:, None]                          # (B, 1, Sq)
    zero = torch.zeros((), dtype=torch.float64, device=q.device)
    lse64 = torch.where(rows, lse.double(), zero)
    prob = torch.where(keep, torch.exp(scores - lse64[..., None]), zero)
    do64 = torch.where(rows[..., None], do.double(), zero)
    delta = torch.where(rows, (do64 * torch.where(rows[..., None], o.double(), zero)).sum(-1), zero)
    dl = zero if dlse is None else torch.where(rows, dlse.double(), zero)
    ds = prob * (do64 @ _per_query_head(v, hq).transpose(-1, -2) - delta[..., None] + dl[..., None])
    dq = scale * ds @ _per_query_head(k, hq)
    dk = _sum_groups(scale * ds.transpose(-1, -2) @ torch.where(rows[..., None], q.double(), zero), hkv)
    dv = _sum_groups(prob.transpose(-1, -2) @ do64, hkv)
    dsink = None
    if sink is not None:
        sink64 = sink.double().view(1, hq, 1)
        share = torch.where(rows & (sink64 > -math.inf), torch.exp(sink64 - lse64), zero)
        dsink = (share * (dl - delta)).sum(dim=(0, 2))
    return dq, dk, dv, dsink


def autograd_backward(q, k, v, do, *, dlse=None, sink=None, **mask) -> dict:
    """O, LSE and the gradients of sum(O * dO) (+ sum(LSE * dlse) over rows with a finite LSE) with respect to q,
    k, v and sink, by torch.autograd through attention_forward: the oracle's gradients without its formulas. A leaf
    the loss does not reach (everything masked) gets a zero gradient."""
    leaves = [None if t is None else t.detach().clone().requires_grad_(True) for t in (q, k, v, sink)]
    o, lse = attention_forward(*leaves[:3], sink=leaves[3], **mask)
    loss = (o * do.double()).sum()
    if dlse is not None:
        loss = loss + torch.where(torch.isfinite(lse), lse * dlse.double(), torch.zeros_like(lse)).sum()
    dq, dk, dv, *rest = torch.autograd.grad(loss, [t for t in leaves if t is not None], allow_unused=True,
                                            materialize_grads=True)
    return dict(o=o.detach(), lse=lse.detach(), dq=dq, dk=dk, dv=dv, dsink=rest[0] if rest else None)
