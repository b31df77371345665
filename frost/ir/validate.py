"""Semantic checks of an attention op (sdpa_forward, sdpa_backward) against its tensors. Each failure is a
GraphError naming the tensor or attribute, the value, and what would be accepted."""

from __future__ import annotations

import math

from frost.errors import GraphError
from frost.ir.ops import SdpaBackwardOp, SdpaForwardOp, SdpaOp
from frost.ir.tensors import IO_DTYPES, TensorSpec


def _expect_dtype(t: TensorSpec, role: str, accepted: tuple[str, ...]) -> None:
    if t.dtype not in accepted:
        raise GraphError(f"{role} tensor {t.name!r}.dtype", t.dtype, " or ".join(accepted))


def _expect_shape(t: TensorSpec, role: str, shape: tuple[int, ...], meaning: str) -> None:
    if t.shape != shape:
        raise GraphError(f"{role} tensor {t.name!r}.shape", t.shape, f"{shape} = {meaning}")


def _check_qkv(op: SdpaOp, ts: dict[str, TensorSpec], same_dtype: tuple[tuple[str, TensorSpec], ...] = ()
               ) -> tuple[int, int, int, int, int]:
    """q, k, v (and `same_dtype`, further io tensors) share one io dtype and rank 4, k and v agree with q on batch,
    head dim and GQA; returns (B, Hq, Sq, Hkv, Dv)."""
    names = op.inputs
    q, k, v = ts[names.q], ts[names.k], ts[names.v]
    io = (("q", q), ("k", k), ("v", v), *same_dtype)
    for role, t in io:
        _expect_dtype(t, role, IO_DTYPES)
        if t.rank != 4:
            raise GraphError(f"{role} tensor {t.name!r}.shape", t.shape, "rank 4, logical (B, H, S, D)")
    ios = ", ".join(role for role, _ in io)
    for role, t in io[1:]:
        if t.dtype != q.dtype:
            raise GraphError(f"{role} tensor {t.name!r}.dtype", t.dtype, f"{q.dtype} (one io dtype for {ios})")
    b, hq, sq, dqk = q.shape
    _, hkv, skv, _ = k.shape
    if k.shape[0] != b:
        raise GraphError(f"k tensor {k.name!r}.shape[0]", k.shape[0], f"{b} (batch of q)")
    if hq % hkv:
        raise GraphError(f"k tensor {k.name!r}.shape[1]", hkv, f"a divisor of Hq={hq} (query heads per kv head must be whole)")
    if k.shape[3] != dqk:
        raise GraphError(f"k tensor {k.name!r}.shape[3]", k.shape[3], f"{dqk} (head dim of q)")
    dv = v.shape[3]
    _expect_shape(v, "v", (b, hkv, skv, dv), "(B, Hkv, Skv, Dv) matching k")
    return b, hq, sq, hkv, dv


def _check_lse(t: TensorSpec, b: int, hq: int, sq: int) -> None:
    _expect_dtype(t, "lse", ("float32",))
    _expect_shape(t, "lse", (b, hq, sq), "(B, Hq, Sq)")


def _check_io(op: SdpaBackwardOp, ts: dict[str, TensorSpec]) -> None:
    names = op.inputs
    o, do = ts[names.o], ts[names.do]
    b, hq, sq, _, dv = _check_qkv(op, ts, (("o", o), ("do", do)))
    _expect_shape(o, "o", (b, hq, sq, dv), "(B, Hq, Sq, Dv)")
    _expect_shape(do, "do", (b, hq, sq, dv), "(B, Hq, Sq, Dv)")
    _check_lse(ts[names.lse], b, hq, sq)


def _check_side_inputs(op: SdpaOp, ts: dict[str, TensorSpec]) -> None:
    """sink fp32 (Hq,), seq_len_q / seq_len_kv int32 (B,), where given."""
    b, hq = ts[op.inputs.q].shape[:2]
    if op.inputs.sink is not None:
        sink = ts[op.inputs.sink]
        _expect_dtype(sink, "sink", ("float32",))
        _expect_shape(sink, "sink", (hq,), "(Hq,)")
    for role in ("seq_len_q", "seq_len_kv"):
        name = getattr(op.inputs, role)
        if name is not None:
            t = ts[name]
            _expect_dtype(t, role, ("int32",))
            _expect_shape(t, role, (b,), "(B,)")


def _check_optional_inputs(op: SdpaBackwardOp, ts: dict[str, TensorSpec]) -> None:
    _check_side_inputs(op, ts)
    if op.inputs.dlse is not None:
        dlse = ts[op.inputs.dlse]
        _expect_dtype(dlse, "dlse", ("float32",))
        _expect_shape(dlse, "dlse", ts[op.inputs.lse].shape, "(B, Hq, Sq), the shape of lse")


def _check_outputs(op: SdpaBackwardOp, ts: dict[str, TensorSpec]) -> None:
    io_dtype = ts[op.inputs.q].dtype
    for role, src in (("dq", op.inputs.q), ("dk", op.inputs.k), ("dv", op.inputs.v)):
        t = ts[getattr(op.outputs, role)]
        _expect_shape(t, role, ts[src].shape, f"the shape of {src!r}")
        if t.dtype != io_dtype:
            raise GraphError(f"{role} tensor {t.name!r}.dtype", t.dtype, f"{io_dtype} (the io dtype)")
    has_sink, has_dsink = op.inputs.sink is not None, op.outputs.dsink is not None
    if has_sink != has_dsink:
        raise GraphError(f"sdpa_backward {op.name!r}.outputs.dsink", op.outputs.dsink,
                         "a dsink output exactly when a sink input is given")
    if has_dsink:
        t = ts[op.outputs.dsink]
        _expect_dtype(t, "dsink", ("float32",))
        _expect_shape(t, "dsink", (ts[op.inputs.q].shape[1],), "(Hq,)")


def _check_attrs(op: SdpaOp) -> None:
    subject = f"{op.op} {op.name!r}"
    for attr in ("band_left", "band_right"):
        value = getattr(op, attr)
        if value is not None and value < 0:
            raise GraphError(f"{subject}.{attr}", value, "None (unbounded) or an integer >= 0")
    if op.attn_scale is not None and not (math.isfinite(op.attn_scale) and op.attn_scale > 0):
        raise GraphError(f"{subject}.attn_scale", op.attn_scale, "None (1/sqrt(Dqk)) or a finite float > 0")


def check_sdpa_backward(op: SdpaBackwardOp, ts: dict[str, TensorSpec]) -> None:
    """Raise GraphError at the first inconsistency between the op, its attributes and its tensors."""
    _check_attrs(op)
    _check_io(op, ts)
    _check_optional_inputs(op, ts)
    _check_outputs(op, ts)


def check_sdpa_forward(op: SdpaForwardOp, ts: dict[str, TensorSpec]) -> None:
    """Raise GraphError at the first inconsistency of a forward: q, k, v as for the backward; o (B, Hq, Sq, Dv) in
    the io dtype; lse fp32 (B, Hq, Sq); sink and lengths as for the backward."""
    _check_attrs(op)
    o = ts[op.outputs.o]
    b, hq, sq, _, dv = _check_qkv(op, ts, (("o", o),))
    _expect_shape(o, "o", (b, hq, sq, dv), "(B, Hq, Sq, Dv)")
    _check_lse(ts[op.outputs.lse], b, hq, sq)
    _check_side_inputs(op, ts)
