"""Input sets for one case: random BSHD tensors plus the forward's O and LSE, shared by every backend.

O and LSE come from frost's reference forward (fp32, one block of query rows at a time so S = 16k fits), with the
case's mask and optional inputs, so every backend's backward runs on consistent, non-trivial data (never zeros).
Several sets rotate when one set fits in L2, so no backend is timed on a warm cache."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from frost import spec
from frost.bench.cases import Case

ROTATION_CAP = 8


@dataclass
class InputSet:
    """One set of a case's tensors. ``optional`` holds the optional inputs the case gives, by frost.spec role."""

    q: object       # (B, Sq, Hq, Dqk)
    k: object       # (B, Skv, Hkv, Dqk)
    v: object       # (B, Skv, Hkv, Dv)
    out: object     # (B, Sq, Hq, Dv)
    dout: object    # (B, Sq, Hq, Dv)
    lse: object     # (B, Hq, Sq) fp32, natural log, every optional input's term included
    optional: dict[str, object] = field(default_factory=dict)


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

    def randn(shape, dtype=dtype):
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)

    q, k, v, dout = (randn(c.shape(role)) for role in ("q", "k", "v", "do"))
    optional = {role: randn(c.shape(role), _optional_dtype(c, role)) for role in c.optional_inputs}
    out, lse = reference_forward(c, q, k, v, optional)
    return InputSet(q, k, v, out, dout, lse, optional)


def _optional_dtype(c: Case, role: str):
    """torch.float32, the one dtype whose values the sets can draw (standard normals) for an optional input."""
    import torch

    if spec.ROLES[role].dtype != "float32":
        raise ValueError(f"{c.name}: no values for the {spec.ROLES[role].dtype} input {role!r} (only float32 ones)")
    return torch.float32


def reference_forward(c: Case, q, k, v, optional: dict):
    """(O in q's dtype, LSE fp32 (B, Hq, Sq)) of the case on BSHD tensors and its optional inputs (by role), from
    frost's reference forward (the project's one oracle of the math; fp32 for half inputs), so the sets hold what a
    correct forward gives."""
    from frost.reference import attention_forward

    left, right = c.band
    bhsd = lambda t: t.transpose(1, 2)  # noqa: E731  (a view: the reference takes any strides)
    out, lse = attention_forward(bhsd(q), bhsd(k), bhsd(v), scale=softmax_scale(c), band_left=left,
                                 band_right=right, **optional)
    return bhsd(out).contiguous(), lse
