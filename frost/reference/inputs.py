"""Cheap validation of the reference engine's arguments, resolved into one `ReferenceProblem`.

Only what is obviously wrong is rejected (ranks, extents, dtypes, devices, argument values); each
TensorError names the tensor or argument, the value, and what would be accepted."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from frost.errors import TensorError
from frost.reference.mask import KeepMask, within_span
from frost.reference.numerics import IO_DTYPES, compute_dtype
from frost.spec import (ROLES, SCALE_ACCEPTED, TensorRole, caller_mask, gqa_accepted, heads_divide, resolved_scale,
                        valid_scale)

STAT_DTYPES = (torch.float32, torch.float64)
LEN_DTYPES = (torch.int32, torch.int64)


@dataclass(frozen=True)
class ReferenceProblem:
    """Sizes, scale, dtypes and the resolved mask of one attention call."""

    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seq_kv: int
    dim_qk: int
    dim_v: int
    scale: float
    io_dtype: torch.dtype
    compute_dtype: torch.dtype
    mask: KeepMask

    @property
    def group(self) -> int:
        """Query heads per kv head (G); query head h reads kv head h // G."""
        return self.heads_q // self.heads_kv


def _expect(name: str, t: object, shape: tuple[int, ...], dtypes: tuple, device: torch.device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TensorError(name, type(t).__name__, "a torch.Tensor")
    if tuple(t.shape) != shape:
        raise TensorError(f"{name}.shape", tuple(t.shape), f"{shape}")
    if t.dtype not in dtypes:
        raise TensorError(f"{name}.dtype", t.dtype, " or ".join(str(d) for d in dtypes))
    if t.device != device:
        raise TensorError(f"{name}.device", t.device, f"{device} (the device of q)")


def _check_qkv(q: object, k: object, v: object) -> tuple[int, ...]:
    """Return (B, Hq, Hkv, Sq, Skv, Dqk, Dv) after checking q, k, v agree."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise TensorError(f"{name}.shape", got, "a rank-4 tensor, logical (B, H, S, D)")
    if q.dtype not in IO_DTYPES:
        raise TensorError("q.dtype", q.dtype, " or ".join(str(d) for d in IO_DTYPES))
    b, hq, sq, dqk = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    if not heads_divide(hq, hkv):
        raise TensorError("k.shape[1]", hkv, gqa_accepted(hq))
    _expect("k", k, (b, hkv, skv, dqk), (q.dtype,), q.device)
    _expect("v", v, (b, hkv, skv, v.shape[3]), (q.dtype,), q.device)
    return b, hq, hkv, sq, skv, dqk, v.shape[3]


def _seq_lens(name: str, t: object, batch: int, full: int, device: torch.device) -> torch.Tensor:
    """Per-batch lengths as int64 on `device`; None means every sequence is full length."""
    if t is None:
        return torch.full((batch,), full, dtype=torch.int64, device=device)
    _expect(name, t, (batch,), LEN_DTYPES, t.device if isinstance(t, torch.Tensor) else device)
    lens = t.to(device=device, dtype=torch.int64)
    if batch and (int(lens.min()) < 0 or int(lens.max()) > full):
        raise TensorError(name, lens.tolist(), f"lengths in [0, {full}]")
    return lens


def _scale(scale: object, dim_qk: int) -> float:
    if not valid_scale(scale):
        raise TensorError("scale", scale, f"None (1/sqrt(Dqk)) or {SCALE_ACCEPTED}")
    return resolved_scale(scale, dim_qk)   # type: ignore[arg-type]


def _optional_float_input(spec: TensorRole) -> bool:
    return spec.optional and spec.dtype == "float32" and bool(spec.reads)


def _expect_side(role: str, t: object, dims: dict[str, int], device: torch.device) -> None:
    """An optional fp32 (or wider) input of frost.spec's, against its dense shape (``dims``: sizes by the spec's
    letters); None passes."""
    spec = ROLES.get(role)
    if spec is None or not _optional_float_input(spec):
        raise TypeError(f"frost.reference: got an unexpected keyword argument {role!r}; accepted optional float "
                        f"inputs: {', '.join(r.role for r in ROLES.values() if _optional_float_input(r))}")
    if t is not None:
        _expect(role, t, spec.extents(dims), STAT_DTYPES, device)


def resolve(q, k, v, *, scale, causal, alignment, band_left, band_right, seq_len_q, seq_len_kv,
            **side) -> ReferenceProblem:
    """Validate the arguments shared by forward and backward and resolve defaults; ``side``: the optional fp32
    inputs both read, by frost.spec role."""
    b, hq, hkv, sq, skv, dqk, dv = _check_qkv(q, k, v)
    for role, t in side.items():
        _expect_side(role, t, {"B": b, "Hq": hq, "Sq": sq}, q.device)
    kept = caller_mask(causal, alignment, band_left, band_right)
    mask = KeepMask(sq=_seq_lens("seq_len_q", seq_len_q, b, sq, q.device),
                    skv=_seq_lens("seq_len_kv", seq_len_kv, b, skv, q.device),
                    left=within_span(kept.left, sq, skv), right=within_span(kept.right, sq, skv),
                    bottom_right=kept.alignment == "bottom_right")
    return ReferenceProblem(batch=b, heads_q=hq, heads_kv=hkv, seq_q=sq, seq_kv=skv, dim_qk=dqk, dim_v=dv,
                            scale=_scale(scale, dqk), io_dtype=q.dtype, compute_dtype=compute_dtype(q.dtype), mask=mask)


def check_backward_tensors(p: ReferenceProblem, q: torch.Tensor, o: object, do: object, lse: object,
                           dlse: object = None) -> None:
    """o and do are (B, Hq, Sq, Dv) in the io dtype; lse (and dlse, when given) is (B, Hq, Sq) fp32 or wider."""
    shape = (p.batch, p.heads_q, p.seq_q, p.dim_v)
    _expect("o", o, shape, (p.io_dtype,), q.device)
    _expect("do", do, shape, (p.io_dtype,), q.device)
    _expect("lse", lse, shape[:3], STAT_DTYPES, q.device)
    _expect_side("dlse", dlse, {"B": p.batch, "Hq": p.heads_q, "Sq": p.seq_q}, q.device)
