"""Semantic checks of an attention op (sdpa_forward, sdpa_backward) against its tensors. Each failure is a
GraphError naming the tensor or attribute, the value, and what would be accepted.

A dense op's tensors are logical (B, H, S, D); a ragged op's (packed sequences over cu_seqlens) drop B and have the
packed token axis T where S was: (H, T, D). The same checks serve both through a _Frame."""

from __future__ import annotations

from dataclasses import dataclass

from frost.spec import gqa_accepted, heads_divide, inputs, outputs, valid_scale
from frost.errors import GraphError
from frost.ir.ops import SdpaBackwardOp, SdpaForwardOp, SdpaOp
from frost.ir.tensors import IO_DTYPES, TensorSpec
from frost.ir.validate_ragged import check_ragged_wiring


@dataclass(frozen=True)
class _Frame:
    """How an op's tensors are shaped: `lead` is (B,) for a dense op and () for a ragged one (B is the offsets'
    extent - 1)."""

    batch: int
    lead: tuple[int, ...]

    def meaning(self, *dims: str) -> str:
        """'(B, Hq, Sq, Dv)' for a dense op, '(Hq, Tq, Dv)' for a ragged one."""
        if self.lead:
            return f"({', '.join(('B', *dims))})"
        return f"({', '.join(d.replace('S', 'T', 1) if d.startswith('S') else d for d in dims)})"

    def shape(self, *dims: int) -> tuple[int, ...]:
        return (*self.lead, *dims)


def _expect_dtype(t: TensorSpec, role: str, accepted: tuple[str, ...]) -> None:
    if t.dtype not in accepted:
        raise GraphError(f"{role} tensor {t.name!r}.dtype", t.dtype, " or ".join(accepted))


def _expect_shape(t: TensorSpec, role: str, shape: tuple[int, ...], meaning: str) -> None:
    if t.shape != shape:
        raise GraphError(f"{role} tensor {t.name!r}.shape", t.shape, f"{shape} = {meaning}")


def _check_qkv(op: SdpaOp, ts: dict[str, TensorSpec], ragged_batch: int | None,
               same_dtype: tuple[tuple[str, TensorSpec], ...] = ()) -> tuple[_Frame, int, int, int, int]:
    """q, k, v (and `same_dtype`, further io tensors) share one io dtype and rank 4 (rank 3 in a ragged op), k and v
    agree with q on batch, head dim and GQA; returns (frame, Hq, Sq, Hkv, Dv)."""
    names = op.inputs
    q, k, v = ts[names.q], ts[names.k], ts[names.v]
    io = (("q", q), ("k", k), ("v", v), *same_dtype)
    rank, logical = (4, "(B, H, S, D)") if ragged_batch is None else (3, "(H, T, D), ragged")
    for role, t in io:
        _expect_dtype(t, role, IO_DTYPES)
        if t.rank != rank:
            raise GraphError(f"{role} tensor {t.name!r}.shape", t.shape, f"rank {rank}, logical {logical}")
    ios = ", ".join(role for role, _ in io)
    for role, t in io[1:]:
        if t.dtype != q.dtype:
            raise GraphError(f"{role} tensor {t.name!r}.dtype", t.dtype, f"{q.dtype} (one io dtype for {ios})")
    frame = _Frame(q.shape[0], (q.shape[0],)) if ragged_batch is None else _Frame(ragged_batch, ())
    n = len(frame.lead)
    hq, sq, dqk = q.shape[n:]
    hkv, skv = k.shape[n:n + 2]
    if frame.lead and k.shape[0] != frame.batch:
        raise GraphError(f"k tensor {k.name!r}.shape[0]", k.shape[0], f"{frame.batch} (batch of q)")
    for name, t, dim in (("q", q, n), ("q", q, n + 2), ("v", v, n + 2)):
        if t.shape[dim] < 1:
            raise GraphError(f"{name} tensor {t.name!r}.shape[{dim}]", t.shape[dim],
                             ">= 1 (heads and head dims are never empty; batches and sequences may be)")
    if not heads_divide(hq, hkv):
        raise GraphError(f"k tensor {k.name!r}.shape[{n}]", hkv, gqa_accepted(hq))
    if k.shape[n + 2] != dqk:
        raise GraphError(f"k tensor {k.name!r}.shape[{n + 2}]", k.shape[n + 2], f"{dqk} (head dim of q)")
    dv = v.shape[n + 2]
    _expect_shape(v, "v", frame.shape(hkv, skv, dv), f"{frame.meaning('Hkv', 'Skv', 'Dv')} matching k")
    return frame, hq, sq, hkv, dv


def _check_lse(t: TensorSpec, frame: _Frame, hq: int, sq: int) -> None:
    _expect_dtype(t, "lse", ("float32",))
    _expect_shape(t, "lse", frame.shape(hq, sq), frame.meaning("Hq", "Sq"))


def _check_io(op: SdpaBackwardOp, ts: dict[str, TensorSpec], ragged_batch: int | None) -> _Frame:
    names = op.inputs
    o, do = ts[names.o], ts[names.do]
    frame, hq, sq, _, dv = _check_qkv(op, ts, ragged_batch, (("o", o), ("do", do)))
    _expect_shape(o, "o", frame.shape(hq, sq, dv), frame.meaning("Hq", "Sq", "Dv"))
    _expect_shape(do, "do", frame.shape(hq, sq, dv), frame.meaning("Hq", "Sq", "Dv"))
    _check_lse(ts[names.lse], frame, hq, sq)
    return frame


def _heads_q(op: SdpaOp, ts: dict[str, TensorSpec], frame: _Frame) -> int:
    return ts[op.inputs.q].shape[len(frame.lead)]


def _check_side_inputs(op: SdpaOp, ts: dict[str, TensorSpec], frame: _Frame) -> None:
    """The optional inputs frost.spec declares for the op, where given, in their dtype: a one-dim one as (Hq,) or
    (B,) (fp32 sink, int32 seq_len_q / seq_len_kv), a wider one in the shape of the required input it is declared
    like (dlse, the shape of lse)."""
    dims = {"Hq": _heads_q(op, ts, frame), "B": frame.batch}
    required = {r.dense_shape: r for r in inputs(op.kind, packed=False) if not r.optional}
    for role in inputs(op.kind, packed=False):
        name = getattr(op.inputs, role.role, None)
        if not role.optional or name is None:
            continue
        t = ts[name]
        _expect_dtype(t, role.role, (role.dtype,))
        if len(role.dense_shape) == 1:
            (dim,) = role.dense_shape
            meaning = f"({dim},)" if frame.lead or dim != "B" else "(B,), one valid length per sequence"
            _expect_shape(t, role.role, (dims[dim],), meaning)
        else:
            like = required[role.dense_shape].role
            _expect_shape(t, role.role, ts[getattr(op.inputs, like)].shape,
                          f"{frame.meaning('Hq', 'Sq')}, the shape of {like}")


def _check_outputs(op: SdpaBackwardOp, ts: dict[str, TensorSpec]) -> None:
    """Each gradient output (frost.spec: dq, dk, dv, dsink) in the shape and dtype of its input, and an optional
    one exactly when its input is given."""
    io_dtype = ts[op.inputs.q].dtype
    for grad in outputs("backward"):
        assert grad.grad_of is not None
        name, src = getattr(op.outputs, grad.role), getattr(op.inputs, grad.grad_of)
        if (name is None) != (src is None):
            raise GraphError(f"sdpa_backward {op.name!r}.outputs.{grad.role}", name,
                             f"a {grad.role} output exactly when a {grad.grad_of} input is given")
        if name is None or src is None:
            continue
        t = ts[name]
        _expect_shape(t, grad.role, ts[src].shape, f"the shape of {src!r}")
        dtype = io_dtype if grad.dtype == "io" else grad.dtype
        if t.dtype != dtype:
            raise GraphError(f"{grad.role} tensor {t.name!r}.dtype", t.dtype,
                             f"{dtype} (the io dtype)" if grad.dtype == "io" else dtype)


def _check_attrs(op: SdpaOp) -> None:
    subject = f"{op.op} {op.name!r}"
    for attr in ("band_left", "band_right"):
        value = getattr(op, attr)
        if value is not None and value < 0:
            raise GraphError(f"{subject}.{attr}", value, "None (unbounded) or an integer >= 0")
    if not valid_scale(op.attn_scale):
        raise GraphError(f"{subject}.attn_scale", op.attn_scale, "None (1/sqrt(Dqk)) or a finite float > 0")


def check_sdpa_backward(op: SdpaBackwardOp, ts: dict[str, TensorSpec]) -> None:
    """Raise GraphError at the first inconsistency between the op, its attributes and its tensors."""
    _check_attrs(op)
    frame = _check_io(op, ts, check_ragged_wiring(op, ts))
    _check_side_inputs(op, ts, frame)
    _check_outputs(op, ts)


def check_sdpa_forward(op: SdpaForwardOp, ts: dict[str, TensorSpec]) -> None:
    """Raise GraphError at the first inconsistency of a forward: q, k, v as for the backward; o (B, Hq, Sq, Dv) in
    the io dtype; lse fp32 (B, Hq, Sq); sink and lengths as for the backward (ragged: without B)."""
    _check_attrs(op)
    o = ts[op.outputs.o]
    frame, hq, sq, _, dv = _check_qkv(op, ts, check_ragged_wiring(op, ts), (("o", o),))
    _expect_shape(o, "o", frame.shape(hq, sq, dv), frame.meaning("Hq", "Sq", "Dv"))
    _check_lse(ts[op.outputs.lse], frame, hq, sq)
    _check_side_inputs(op, ts, frame)
