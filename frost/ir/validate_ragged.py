"""The packed variable-length (ragged) rules of an attention op: cu_seqlens_q and cu_seqlens_kv come together,
name int32 (B + 1,) offsets tensors, and split the token axis of exactly the q-side and kv-side tensors. Each
failure is a GraphError naming the field, the value, and what would be accepted."""

from __future__ import annotations

from frost.errors import GraphError
from frost.ir.ops import SdpaOp
from frost.ir.tensors import TensorSpec

Q_SIDE = ("q", "o", "do", "lse", "dlse", "dq")     # tensors with one row per query token
KV_SIDE = ("k", "v", "dk", "dv")                   # tensors with one row per key/value token
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
