"""Input sets for one case: random BSHD tensors plus the forward's O and LSE, shared by every backend.

O and LSE come from an fp32 torch forward (chunked per batch and kv head so S = 16k fits), with the case's mask and
sink, so every backend's backward runs on consistent, non-trivial data (never zeros). Several sets rotate when one
set fits in L2, so no backend is timed on a warm cache."""

from __future__ import annotations

import math
from dataclasses import dataclass

from frost.bench.cases import Case

ROTATION_CAP = 8


@dataclass
class InputSet:
    q: object       # (B, Sq, Hq, Dqk)
    k: object       # (B, Skv, Hkv, Dqk)
    v: object       # (B, Skv, Hkv, Dv)
    out: object     # (B, Sq, Hq, Dv)
    dout: object    # (B, Sq, Hq, Dv)
    lse: object     # (B, Hq, Sq) fp32, natural log, sink included
    sink: object    # (Hq,) fp32 or None


def set_bytes(c: Case, elem_size: int) -> int:
    """Device bytes one backward touches: inputs, O, dO, LSE and the dQ/dK/dV it writes."""
    q_like = c.batch * c.seq_q * c.heads_q
    kv = c.batch * c.seq_kv * c.heads_kv
    elems = 2 * q_like * c.head_dim + 2 * kv * c.head_dim + 2 * kv * c.head_dim_v + 2 * q_like * c.head_dim_v
    return elems * elem_size + q_like * 4


def rotation_count(bytes_per_set: int, l2_bytes: int, cap: int = ROTATION_CAP) -> int:
    """Sets to cycle through so that, between two uses of a set, the others have streamed at least L2's size."""
    if bytes_per_set <= 0 or bytes_per_set >= l2_bytes:
        return 1
    return min(cap, 1 + math.ceil(l2_bytes / bytes_per_set))


def softmax_scale(c: Case) -> float:
    return 1.0 / math.sqrt(c.head_dim)


def make_sets(c: Case, dtype, device, n_sets: int, seed: int = 0) -> list[InputSet]:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    return [_one_set(c, dtype, device, gen) for _ in range(n_sets)]


def _one_set(c: Case, dtype, device, gen) -> InputSet:
    import torch

    def randn(*shape):
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)

    q = randn(c.batch, c.seq_q, c.heads_q, c.head_dim)
    k = randn(c.batch, c.seq_kv, c.heads_kv, c.head_dim)
    v = randn(c.batch, c.seq_kv, c.heads_kv, c.head_dim_v)
    dout = randn(c.batch, c.seq_q, c.heads_q, c.head_dim_v)
    sink = torch.randn(c.heads_q, generator=gen, device=device, dtype=torch.float32) if c.sink else None
    out, lse = reference_forward(c, q, k, v, sink)
    return InputSet(q, k, v, out, dout, lse, sink)


def keep_mask(c: Case, device):
    """(Sq, Skv) bool: key j is kept for query i (top-left aligned band); None when nothing is masked."""
    import torch

    left, right = c.band
    if left is None and right is None:
        return None
    i = torch.arange(c.seq_q, device=device)[:, None]
    j = torch.arange(c.seq_kv, device=device)[None, :]
    keep = torch.ones(c.seq_q, c.seq_kv, dtype=torch.bool, device=device)
    if left is not None:
        keep &= j >= i - left
    if right is not None:
        keep &= j <= i + right
    return keep


def reference_forward(c: Case, q, k, v, sink):
    """(O in q's dtype, LSE fp32 (B, Hq, Sq)) of softmax(scale·QKᵀ + mask, sink column) · V, in fp32."""
    import torch

    g = c.heads_q // c.heads_kv
    mask = keep_mask(c, q.device)
    out = torch.empty(c.batch, c.seq_q, c.heads_q, c.head_dim_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(c.batch, c.heads_q, c.seq_q, dtype=torch.float32, device=q.device)
    for b in range(c.batch):
        for h in range(c.heads_kv):
            heads = slice(h * g, (h + 1) * g)
            qs = q[b, :, heads].transpose(0, 1).float()                     # (G, Sq, D)
            s = softmax_scale(c) * qs @ k[b, :, h].float().T                 # (G, Sq, Skv)
            if mask is not None:
                s.masked_fill_(~mask, float("-inf"))
            row = torch.logsumexp(s, dim=-1)
            if sink is not None:
                row = torch.logaddexp(row, sink[heads, None])
            p = torch.exp(s - row[..., None])
            out[b, :, heads] = (p @ v[b, :, h].float()).transpose(0, 1).to(q.dtype)
            lse[b, heads] = row
    return out, lse
