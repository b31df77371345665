"""The fp64 oracle on packed (THD) sequences: every sequence alone through the dense oracle (helpers.oracle), as
DESIGN.md defines packed attention. The arguments are frost.reference.varlen's: logical (H, T, D) tensors (any
strides), cu_seqlens prefix sums (the sequences need not start at token 0), seqused (each sequence's valid tokens at
its start). Tokens outside every sequence are never read: O = 0, LSE = -inf, zero gradients."""

from __future__ import annotations

import math

import torch

from helpers.oracle import as_ints, attention_backward, attention_forward


def segments(cu_q, cu_kv, seqused_q=None, seqused_kv=None) -> list[tuple[slice, slice, dict]]:
    """(query tokens, key tokens, dense length arguments) of every sequence."""
    cq, ckv = as_ints(cu_q), as_ints(cu_kv)
    used_q, used_kv = (None if u is None else as_ints(u) for u in (seqused_q, seqused_kv))
    out = []
    for b in range(len(cq) - 1):
        lens = dict(seq_len_q=None if used_q is None else [used_q[b]],
                    seq_len_kv=None if used_kv is None else [used_kv[b]])
        out.append((slice(cq[b], cq[b + 1]), slice(ckv[b], ckv[b + 1]), lens))
    return out


def _outside(cu, tokens: int) -> tuple[int, int]:
    """Tokens before the first sequence and after the last."""
    c = as_ints(cu)
    return c[0], tokens - c[-1]


def attention_forward_varlen(q, k, v, cu_q, cu_kv, *, seqused_q=None, seqused_kv=None, sink=None, **mask):
    """O (Hq, Tq, Dv) and LSE (Hq, Tq), fp64, differentiable in q, k, v and sink; `mask`: scale, causal, alignment,
    band_left, band_right (helpers.oracle.attention_forward's)."""
    hq, tq = q.shape[:2]
    before, after = _outside(cu_q, tq)
    empty_o = lambda n: torch.zeros(hq, n, v.shape[2], dtype=torch.float64, device=q.device)  # noqa: E731
    empty_lse = lambda n: torch.full((hq, n), -math.inf, dtype=torch.float64, device=q.device)  # noqa: E731
    os, lses = [empty_o(before)], [empty_lse(before)]
    for rows, keys, lens in segments(cu_q, cu_kv, seqused_q, seqused_kv):
        o, lse = attention_forward(q[:, rows][None], k[:, keys][None], v[:, keys][None], sink=sink, **lens, **mask)
        os.append(o[0])
        lses.append(lse[0])
    os.append(empty_o(after))
    lses.append(empty_lse(after))
    return torch.cat(os, dim=1), torch.cat(lses, dim=1)


def attention_backward_varlen(q, k, v, o, do, lse, cu_q, cu_kv, *, seqused_q=None, seqused_kv=None, sink=None,
                              dlse=None, **mask):
    """dQ, dK, dV (logical (H, T, D), fp64, zero outside every sequence) and dSink summed over the sequences (or
    None); `lse` and `dlse` (Hq, Tq) may be head-major or token-major views."""
    dq = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    dk = torch.zeros(k.shape, dtype=torch.float64, device=q.device)
    dv = torch.zeros(v.shape, dtype=torch.float64, device=q.device)
    dsink = None if sink is None else torch.zeros(sink.shape, dtype=torch.float64, device=q.device)
    for rows, keys, lens in segments(cu_q, cu_kv, seqused_q, seqused_kv):
        g = attention_backward(q[:, rows][None], k[:, keys][None], v[:, keys][None], o[:, rows][None],
                               do[:, rows][None], lse[:, rows][None], sink=sink,
                               dlse=None if dlse is None else dlse[:, rows][None], **lens, **mask)
        dq[:, rows], dk[:, keys], dv[:, keys] = g[0][0], g[1][0], g[2][0]
        if dsink is not None:
            dsink += g[3]
    return dq, dk, dv, dsink
