"""Reference attention over packed variable-length sequences (FlashAttention's varlen convention).

Tensors are LOGICAL (H, T, D) views (any strides; packed THD memory is q.transpose(0, 1) of a (T, H, D) tensor) and
LSE is (H, T). Sequence b owns query tokens [cu_q[b], cu_q[b + 1]) and key/value tokens [cu_kv[b], cu_kv[b + 1]);
each sequence runs through the dense reference as a (1, H, len, D) batch, so masks, alignment, bands, sink and GQA
mean per sequence exactly what they mean per batch row. seqused (valid tokens at the start of each segment) becomes
that batch's seq_len. Tokens outside every segment are never read: O = 0, LSE = -inf, gradients 0. The offsets are
read on the host, so this synchronises (like the dense reference's length checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import torch

from frost.errors import TensorError
from frost.reference.backward import attention_backward
from frost.reference.blocks import empty_like_layout
from frost.reference.forward import attention_forward
from frost.reference.inputs import LEN_DTYPES, ReferenceProblem, check_backward_tensors, resolve


class _Mask(TypedDict):
    """The mask keywords every sequence's dense call shares."""

    scale: float | None
    causal: bool
    alignment: str
    band_left: int | None
    band_right: int | None


@dataclass(frozen=True)
class Segment:
    """One sequence: its query and key/value token ranges, and the valid lengths at their start."""

    q: slice
    kv: slice
    used_q: torch.Tensor | None     # (1,) int64, or None without seqused
    used_kv: torch.Tensor | None

    def lengths(self) -> dict:
        """The dense reference's seq_len_q / seq_len_kv for this sequence (absent: the whole segment)."""
        return {k: t for k, t in (("seq_len_q", self.used_q), ("seq_len_kv", self.used_kv)) if t is not None}


def _rank3(name: str, t: object) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() != 3:
        got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        raise TensorError(f"{name}.shape", got, "a rank-3 tensor, logical (H, T, D): tokens of all sequences on dim 1")


def _ints(name: str, t: object, shape: tuple[int, ...] | None) -> list[int]:
    """An int32/int64 vector's values on the host (shape None: any (n,) with n >= 1)."""
    if not isinstance(t, torch.Tensor):
        raise TensorError(name, type(t).__name__, "a torch.Tensor")
    if t.dtype not in LEN_DTYPES:
        raise TensorError(f"{name}.dtype", t.dtype, " or ".join(str(d) for d in LEN_DTYPES))
    if (shape is not None and tuple(t.shape) != shape) or t.dim() != 1 or t.numel() < 1:
        raise TensorError(f"{name}.shape", tuple(t.shape), f"{shape}" if shape is not None else "(B + 1,)")
    return [int(x) for x in t.tolist()]


def _offsets(name: str, t: object, tokens: int) -> list[int]:
    values = _ints(name, t, None)
    if values[0] < 0 or values[-1] > tokens or any(b < a for a, b in zip(values, values[1:])):
        raise TensorError(name, values, f"non-decreasing offsets in [0, {tokens}] (the tensors hold {tokens} tokens)")
    return values


def _used(name: str, t: object, segments: list[int], device: torch.device) -> list[torch.Tensor | None]:
    """Per sequence, its seqused as a (1,) int64 tensor on `device`, or None each when `t` is None."""
    if t is None:
        return [None] * len(segments)
    values = _ints(name, t, (len(segments),))
    bad = [(u, n) for u, n in zip(values, segments) if not 0 <= u <= n]
    if bad:
        raise TensorError(name, values, f"0 <= {name}[b] <= the length of segment b ({segments})")
    return [torch.tensor([u], dtype=torch.int64, device=device) for u in values]


def segments(q: torch.Tensor, k: torch.Tensor, cu_q: object, cu_kv: object, seqused_q: object = None,
             seqused_kv: object = None) -> list[Segment]:
    """The sequences of a packed batch, checked: offsets non-decreasing within the token axis, one batch size for
    both, seqused within each segment."""
    oq, okv = _offsets("cu_q", cu_q, q.shape[1]), _offsets("cu_kv", cu_kv, k.shape[1])
    if len(okv) != len(oq):
        raise TensorError("cu_kv.shape", (len(okv),), f"({len(oq)},), the shape of cu_q (one entry per sequence + 1)")
    lq = [b - a for a, b in zip(oq, oq[1:])]
    lkv = [b - a for a, b in zip(okv, okv[1:])]
    uq = _used("seqused_q", seqused_q, lq, q.device)
    ukv = _used("seqused_kv", seqused_kv, lkv, q.device)
    return [Segment(slice(oq[b], oq[b + 1]), slice(okv[b], okv[b + 1]), uq[b], ukv[b]) for b in range(len(lq))]


def _problem(q, k, v, mask: _Mask, sink) -> ReferenceProblem:
    """Validate dtypes, heads, head dims, sink and mask arguments once, on empty slices of the tensors (so a batch
    of empty sequences is checked too)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _rank3(name, t)
    return resolve(q[None, :, :0], k[None, :, :0], v[None, :, :0], seq_len_q=None, seq_len_kv=None, sink=sink,
                   **mask)


def attention_forward_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor,
                             cu_kv: torch.Tensor, *, scale: float | None = None, causal: bool = False,
                             alignment: str = "top_left", band_left: int | None = None,
                             band_right: int | None = None, seqused_q: torch.Tensor | None = None,
                             seqused_kv: torch.Tensor | None = None, sink: torch.Tensor | None = None,
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """O (Hq, Tq, Dv) in q's dtype and memory order and LSE (Hq, Tq) head-major (fp32, fp64 for fp64 inputs),
    sequence by sequence."""
    mask = _Mask(scale=scale, causal=causal, alignment=alignment, band_left=band_left, band_right=band_right)
    p = _problem(q, k, v, mask, sink)
    segs = segments(q, k, cu_q, cu_kv, seqused_q, seqused_kv)
    o = empty_like_layout(q, (p.heads_q, q.shape[1], p.dim_v), p.io_dtype).zero_()
    lse = torch.full((p.heads_q, q.shape[1]), float("-inf"), dtype=p.compute_dtype, device=q.device)
    for s in segs:
        if s.q.stop == s.q.start:
            continue
        o_b, lse_b = attention_forward(q[None, :, s.q], k[None, :, s.kv], v[None, :, s.kv], sink=sink,
                                       **s.lengths(), **mask)
        o[:, s.q] = o_b[0]
        lse[:, s.q] = lse_b[0]
    return o, lse


def _check_backward(p: ReferenceProblem, q, o, do, lse, dlse) -> None:
    """o and do are (Hq, Tq, Dv) and lse (and dlse) (Hq, Tq), dtypes and devices as for the dense backward."""
    tokens = q.shape[1]
    for name, t, shape in (("o", o, (p.heads_q, tokens, p.dim_v)), ("do", do, (p.heads_q, tokens, p.dim_v)),
                           ("lse", lse, (p.heads_q, tokens)), ("dlse", dlse, (p.heads_q, tokens))):
        if name == "dlse" and t is None:
            continue
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise TensorError(f"{name}.shape", got, f"{shape}")
    empty = slice(0, 0)
    check_backward_tensors(p, q, o[None, :, empty], do[None, :, empty], lse[None, :, empty],
                           None if dlse is None else dlse[None, :, empty])


def attention_backward_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                              do: torch.Tensor, lse: torch.Tensor, cu_q: torch.Tensor, cu_kv: torch.Tensor, *,
                              scale: float | None = None, causal: bool = False, alignment: str = "top_left",
                              band_left: int | None = None, band_right: int | None = None,
                              seqused_q: torch.Tensor | None = None, seqused_kv: torch.Tensor | None = None,
                              sink: torch.Tensor | None = None, dlse: torch.Tensor | None = None,
                              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """dQ, dK, dV in q's dtype and the memory order of q, k, v (zero outside every segment), and dSink (Hq,)
    summed over every sequence in order (fp32, fp64 for fp64 inputs) or None without a sink. `lse` (and `dlse`)
    may be head-major or token-major."""
    mask = _Mask(scale=scale, causal=causal, alignment=alignment, band_left=band_left, band_right=band_right)
    p = _problem(q, k, v, mask, sink)
    _check_backward(p, q, o, do, lse, dlse)
    segs = segments(q, k, cu_q, cu_kv, seqused_q, seqused_kv)
    dq, dk, dv = (empty_like_layout(t, tuple(t.shape), p.io_dtype).zero_() for t in (q, k, v))
    dsink = torch.zeros(p.heads_q, dtype=p.compute_dtype, device=q.device) if sink is not None else None
    for s in segs:
        if s.q.stop == s.q.start:
            continue
        dq_b, dk_b, dv_b, dsink_b = attention_backward(
            q[None, :, s.q], k[None, :, s.kv], v[None, :, s.kv], o[None, :, s.q], do[None, :, s.q],
            lse[None, :, s.q], sink=sink, dlse=None if dlse is None else dlse[None, :, s.q], **s.lengths(), **mask)
        dq[:, s.q], dk[:, s.kv], dv[:, s.kv] = dq_b[0], dk_b[0], dv_b[0]
        if dsink is not None and dsink_b is not None:   # dsink_b is given whenever there is a sink
            dsink += dsink_b
    return dq, dk, dv, dsink
