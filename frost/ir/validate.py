"""Semantic checks of an attention op (sdpa_forward, sdpa_backward) against its tensors. Each failure is a
GraphError naming the tensor or attribute, the value, and what would be accepted.

A dense op's tensors are logical (B, H, S, D); a ragged op's (packed sequences over cu_seqlens) drop B and have the
packed token axis T where S was: (H, T, D). The same checks serve both through a _Frame. The packed rules:
cu_seqlens_q and cu_seqlens_kv come together, name int32 (B + 1,) offsets tensors, and split the token axis of
exactly the q-side and kv-side tensors (frost.spec says which side each role is on)."""

from __future__ import annotations

from dataclasses import dataclass

from frost.errors import GraphError
from frost.ir.ops import SdpaBackwardOp, SdpaForwardOp, SdpaOp
from frost.ir.tensors import IO_DTYPES, TensorSpec
from frost.spec import (BOUND_ACCEPTED, SCALE_ACCEPTED, TENSORS, gqa_accepted, heads_divide, inputs, outputs,
                        valid_bound, valid_scale)


Q_SIDE = tuple(t.role for t in TENSORS if t.side == "q")     # tensors with one row per query token
KV_SIDE = tuple(t.role for t in TENSORS if t.side == "kv")   # tensors with one row per key/value token
OFFSETS = {"cu_seqlens_q": Q_SIDE, "cu_seqlens_kv": KV_SIDE}


def check_offsets(t: TensorSpec, subject: str) -> None:
    """An offsets tensor (cu_seqlens) is a dense int32 (B + 1,) tensor with B >= 0."""
    if t.dtype != "int32":
        raise GraphError(f"{subject}.dtype", t.dtype, "int32 (cu_seqlens offsets)")
    if t.rank != 1 or t.shape[0] < 1:
        raise GraphError(f"{subject}.shape", t.shape, "(B + 1,) with B >= 0 (one offset per sequence boundary)")
    if t.ragged is not None:
        raise GraphError(f"{subject}.ragged", t.ragged, "None (offsets are a plain int32 vector)")


def check_ragged_references(tensors: dict[str, TensorSpec]) -> None:
    """Every ragged tensor's offsets name a tensor of the graph, and that tensor is a valid offsets tensor."""
    for t in tensors.values():
        if t.ragged is None:
            continue
        offsets = tensors.get(t.ragged.offsets)
        if offsets is None:
            raise GraphError(f"tensor {t.name!r}.ragged.offsets", t.ragged.offsets,
                             f"the name of a declared int32 (B + 1,) tensor ({', '.join(sorted(tensors))})")
        check_offsets(offsets, f"tensor {offsets.name!r} (the offsets of ragged tensor {t.name!r})")


def _ports(op: SdpaOp) -> dict[str, str]:
    """role -> tensor name of every input and output the op is wired to."""
    pairs = {**op.inputs.model_dump(), **op.outputs.model_dump()}
    return {role: name for role, name in pairs.items() if name is not None}


def _dense_only(op: SdpaOp, ports: dict[str, str], ts: dict[str, TensorSpec]) -> None:
    for role, name in ports.items():
        if ts[name].ragged is not None:
            raise GraphError(f"{role} tensor {name!r}.ragged", ts[name].ragged,
                             f"None: {op.op} {op.name!r} has no cu_seqlens_q / cu_seqlens_kv, so its tensors are "
                             "dense (B, H, S, ...)")


def _batch(cu_seqlens_q: str, cu_seqlens_kv: str, ts: dict[str, TensorSpec]) -> int:
    """B of a ragged op, from its offsets tensors (which must agree)."""
    cu_q, cu_kv = ts[cu_seqlens_q], ts[cu_seqlens_kv]
    check_offsets(cu_q, f"cu_seqlens_q tensor {cu_q.name!r}")
    check_offsets(cu_kv, f"cu_seqlens_kv tensor {cu_kv.name!r}")
    if cu_kv.shape != cu_q.shape:
        raise GraphError(f"cu_seqlens_kv tensor {cu_kv.name!r}.shape", cu_kv.shape,
                         f"{cu_q.shape} = (B + 1,), the shape of cu_seqlens_q {cu_q.name!r} (one batch of sequences)")
    return cu_q.shape[0] - 1


def _check_side(role: str, t: TensorSpec, field: str, offsets: str, ref: tuple[str, TensorSpec],
                ops_subject: str) -> None:
    """One q-side or kv-side tensor: ragged over `offsets` (the op's `field`) with the max_len of its side's `ref`
    (q for the q side, k for the kv side)."""
    name = t.name
    if t.ragged is None:
        raise GraphError(f"{role} tensor {name!r}.ragged", None,
                         f"ragged over {offsets!r} ({ops_subject}.inputs.{field} is given)")
    if t.ragged.offsets != offsets:
        raise GraphError(f"{role} tensor {name!r}.ragged.offsets", t.ragged.offsets,
                         f"{offsets!r} (the op's {field})")
    ref_role, ref_t = ref
    if ref_t.ragged is not None and t.ragged.max_len != ref_t.ragged.max_len:
        raise GraphError(f"{role} tensor {name!r}.ragged.max_len", t.ragged.max_len,
                         f"{ref_t.ragged.max_len} (the max_len of {ref_role} tensor {ref_t.name!r})")


def check_ragged_wiring(op: SdpaOp, ts: dict[str, TensorSpec]) -> int | None:
    """None for a dense op (after checking none of its tensors is ragged); B for a ragged op, after checking its
    offsets and that exactly its q-side and kv-side tensors are ragged over them with one max_len per side."""
    subject = f"{op.op} {op.name!r}"
    ins, ports = op.inputs, _ports(op)
    if (ins.cu_seqlens_q is None) != (ins.cu_seqlens_kv is None):
        missing = "cu_seqlens_kv" if ins.cu_seqlens_kv is None else "cu_seqlens_q"
        raise GraphError(f"{subject}.inputs.{missing}", None,
                         "a tensor name: cu_seqlens_q and cu_seqlens_kv are given together (packed sequences) or "
                         "not at all")
    if ins.cu_seqlens_q is None or ins.cu_seqlens_kv is None:   # both None (given together, as checked above)
        _dense_only(op, ports, ts)
        return None
    batch = _batch(ins.cu_seqlens_q, ins.cu_seqlens_kv, ts)
    sides = {role: field for field, roles in OFFSETS.items() for role in roles}
    refs = {"cu_seqlens_q": ("q", ts[ins.q]), "cu_seqlens_kv": ("k", ts[ins.k])}
    for role in ("q", "k", *(r for r in ports if r not in ("q", "k"))):
        name = ports[role]
        field = sides.get(role)
        if field is None:
            if ts[name].ragged is not None:
                raise GraphError(f"{role} tensor {name!r}.ragged", ts[name].ragged,
                                 "None (only the q-side and kv-side tensors of a packed op are ragged)")
            continue
        _check_side(role, ts[name], field, getattr(ins, field), refs[field], subject)
    return batch


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
        if not valid_bound(getattr(op, attr)):
            raise GraphError(f"{subject}.{attr}", getattr(op, attr), BOUND_ACCEPTED)
    if not valid_scale(op.attn_scale):
        raise GraphError(f"{subject}.attn_scale", op.attn_scale, f"None (1/sqrt(Dqk)) or {SCALE_ACCEPTED}")


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
