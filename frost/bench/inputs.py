"""Input sets for one case: random BSHD tensors plus the forward's O and LSE, shared by every backend.

O and LSE come from frost's reference forward (fp32, one block of query rows at a time so S = 16k fits), with the
case's mask and sink, so every backend's backward runs on consistent, non-trivial data (never zeros). Several sets
rotate when one set fits in L2, so no backend is timed on a warm cache."""

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


def reference_forward(c: Case, q, k, v, sink):
    """(O in q's dtype, LSE fp32 (B, Hq, Sq)) of the case on BSHD tensors, from frost's reference forward (the
    project's one oracle of the math; fp32 for half inputs), so the sets hold what a correct forward gives."""
    from frost.reference import attention_forward

    left, right = c.band
    bhsd = lambda t: t.transpose(1, 2)  # noqa: E731  (a view: the reference takes any strides)
    out, lse = attention_forward(bhsd(q), bhsd(k), bhsd(v), scale=softmax_scale(c), band_left=left,
                                 band_right=right, sink=sink)
    return bhsd(out).contiguous(), lse
