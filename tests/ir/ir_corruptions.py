"""Corruptions of a valid graph's JSON form, one per inconsistency the IR must reject. Each edits the dict in
place (drawing what it needs from hypothesis) and returns what the GraphError must name: strings its subject
must contain (a tensor is named by its quoted repr) and, as ("value", x), the value it must report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from hypothesis import strategies as st

from frost.ir import contiguous_strides, layout_strides

IO_DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class Corruption:
    name: str
    apply: Callable  # (doc, data) -> tuple of strings the message names
    needs: tuple[str, ...] = ()  # graph features it needs: "sink", "padded", "ragged" or "dense"
    json_only: bool = False  # outputs are derived by the builder, so only JSON can carry this one

    def __repr__(self) -> str:
        return self.name


def sdpa(doc: dict) -> dict:
    return next(op for op in doc["ops"] if op["op"] == "sdpa_backward")


def tensor(doc: dict, name: str) -> dict:
    return next(t for t in doc["tensors"] if t["name"] == name)


def role(doc: dict, r: str) -> dict:
    op = sdpa(doc)
    return tensor(doc, op["inputs"][r] if r in op["inputs"] else op["outputs"][r])


def is_ragged(doc: dict) -> bool:
    return sdpa(doc)["inputs"]["cu_seqlens_q"] is not None


def heads_dim(t: dict) -> int:
    """Index of the head axis: 1 in a dense (B, H, S, ...) tensor, 0 in a ragged (H, T, ...) one."""
    return 0 if t["ragged"] is not None else 1


def reshape(t: dict, shape: tuple[int, ...]) -> None:
    """New shape, strides recomputed in the tensor's layout (so only the shape is wrong)."""
    ragged = t["ragged"] is not None
    rank = 3 if ragged else 4
    packed = t["strides"] is not None and len(t["shape"]) == rank and len(shape) == rank
    t["shape"] = list(shape)
    if t["strides"] is not None:
        t["strides"] = list(layout_strides(tuple(shape), "bshd", ragged=ragged) if packed
                            else contiguous_strides(tuple(shape)))


def _gqa(doc, data):
    h = heads_dim(role(doc, "q"))
    hq = role(doc, "q")["shape"][h]
    hkv = data.draw(st.integers(2, 2 * hq + 1).filter(lambda n: hq % n))
    for r in ("k", "v"):
        t = role(doc, r)
        reshape(t, (*t["shape"][:h], hkv, *t["shape"][h + 1:]))
    return repr(role(doc, "k")["name"]), f"shape[{h}]", ("value", hkv)


def _head_dims(doc, data):
    r = data.draw(st.sampled_from(("k", "o", "do")))
    t = role(doc, r)
    reshape(t, (*t["shape"][:-1], t["shape"][-1] + data.draw(st.integers(1, 64))))
    return repr(t["name"]), "shape"


def _not_fp32(which):
    """A corruption giving the fp32 tensor of role ``which`` (lse, sink) another dtype."""
    def corrupt(doc, data):
        t = role(doc, which)
        t["dtype"] = data.draw(st.sampled_from(("float16", "bfloat16", "float64", "int32")))
        return repr(t["name"]), "dtype"
    return corrupt


def _lse_shape(doc, data):
    t = role(doc, "lse")
    t["strides"] = None
    if t["ragged"] is not None:
        h, s = t["shape"]
        t["shape"] = data.draw(st.sampled_from(([h, s + 1], [h + 1, s], [h, s, 1], [1, h, s])))
        return repr(t["name"]), "shape"
    b, h, s = t["shape"]
    t["shape"] = data.draw(st.sampled_from(([b, h, s + 1], [b, h + 1, s], [b, h], [b, h, s, 1], [b + 1, h, s])))
    return repr(t["name"]), "shape"


def _sink_shape(doc, data):
    t = role(doc, "sink")
    t["shape"] = data.draw(st.sampled_from(([t["shape"][0] + 1], [1, t["shape"][0]], [t["shape"][0], 1])))
    return repr(t["name"]), "shape"


def _seq_len(doc, data):
    t = role(doc, data.draw(st.sampled_from(("seq_len_q", "seq_len_kv"))))
    if data.draw(st.booleans()):
        t["dtype"] = data.draw(st.sampled_from(("float16", "bfloat16", "float32", "float64")))
        return repr(t["name"]), "dtype"
    t["shape"] = data.draw(st.sampled_from(([t["shape"][0] + 1], [t["shape"][0], 1])))
    return repr(t["name"]), "shape"


def _negative_band(doc, data):
    attr = data.draw(st.sampled_from(("band_left", "band_right")))
    value = sdpa(doc)[attr] = data.draw(st.just(-1) | st.integers(-(1 << 31), -1))
    return attr, ("value", value)


def _bad_scale(doc, data):
    value = sdpa(doc)["attn_scale"] = data.draw(st.sampled_from((0.0, -1.0, -1e-6)))
    return "attn_scale", ("value", value)


def _mixed_dtypes(doc, data):
    t = role(doc, data.draw(st.sampled_from(("k", "v", "o", "do"))))
    t["dtype"] = data.draw(st.sampled_from([d for d in IO_DTYPES if d != t["dtype"]]))
    return repr(t["name"]), "dtype"


def _bad_strides(doc, data):
    t = role(doc, data.draw(st.sampled_from(("q", "k", "v", "o", "do"))))
    shape = t["shape"]
    strides = list(t["strides"] or contiguous_strides(tuple(shape)))
    big = [i for i, e in enumerate(shape) if e > 1]
    kinds = ["rank", "negative"] + (["zero"] if big else []) + (["overlap"] if len(big) > 1 else [])
    kind = data.draw(st.sampled_from(kinds))
    if kind == "rank":
        strides = strides[:-1]
    elif kind == "negative":
        i = data.draw(st.integers(0, len(strides) - 1))
        strides[i] = -strides[i]
    elif kind == "zero":
        strides[data.draw(st.sampled_from(big))] = 0
    else:
        strides = [1] * len(shape)
    t["strides"] = strides
    return repr(t["name"]), "strides"


def _bad_extent(doc, data):
    """A negative extent anywhere, or no head / no head dim (B, S and T may be 0: an empty problem)."""
    t = role(doc, data.draw(st.sampled_from(("q", "k", "v", "lse"))))
    heads_or_dims = [len(t["shape"]) - 3, len(t["shape"]) - 1] if t["name"] != role(doc, "lse")["name"] else []
    dim = data.draw(st.integers(0, len(t["shape"]) - 1))
    t["shape"][dim] = data.draw(st.integers(-3, 0 if dim in heads_or_dims else -1))
    return repr(t["name"]), "shape"


def _unknown_ref(doc, data):
    op = sdpa(doc)
    r = data.draw(st.sampled_from([r for r, n in op["inputs"].items() if n is not None]))
    names = {t["name"] for t in doc["tensors"]}
    missing = data.draw(st.text(min_size=1, max_size=8).filter(lambda n: n not in names))
    op["inputs"][r] = missing
    return "tensor reference", ("value", missing)


def _duplicate(doc, data):
    written = {n for op in doc["ops"] for n in (op["outputs"].values() if isinstance(op["outputs"], dict)
                                                else op["outputs"]) if n is not None}
    plain = [t for t in doc["tensors"] if t["name"] not in written]
    a, b = data.draw(st.lists(st.sampled_from(plain), min_size=2, max_size=2, unique_by=lambda t: t["name"]))
    a["name"] = b["name"]
    return "tensor name", ("value", b["name"])


def _dsink_without_sink(doc, data):
    sdpa(doc)["inputs"]["sink"] = None
    return "outputs.dsink", ("value", sdpa(doc)["outputs"]["dsink"])


def _sink_without_dsink(doc, data):
    sdpa(doc)["outputs"]["dsink"] = None
    return "outputs.dsink", ("value", None)


def _output_shape(doc, data):
    t = role(doc, data.draw(st.sampled_from(("dq", "dk", "dv"))))
    reshape(t, (*t["shape"][:-1], t["shape"][-1] + 1))
    return repr(t["name"]), "shape"


Q_SIDE_INPUTS = ("q", "o", "do", "lse")
KV_SIDE_INPUTS = ("k", "v")


def _offsets(doc, which: str) -> dict:
    return tensor(doc, sdpa(doc)["inputs"][which])


def _one_offsets_only(doc, data):
    dropped = data.draw(st.sampled_from(("cu_seqlens_q", "cu_seqlens_kv")))
    sdpa(doc)["inputs"][dropped] = None
    return f"inputs.{dropped}", ("value", None)


def _offsets_dtype(doc, data):
    t = _offsets(doc, data.draw(st.sampled_from(("cu_seqlens_q", "cu_seqlens_kv"))))
    t["dtype"] = data.draw(st.sampled_from(("float16", "bfloat16", "float32", "float64")))
    return repr(t["name"]), "dtype", ("value", t["dtype"])


def _offsets_shape(doc, data):
    t = _offsets(doc, data.draw(st.sampled_from(("cu_seqlens_q", "cu_seqlens_kv"))))
    t["shape"] = data.draw(st.sampled_from(([0], [t["shape"][0], 1], [1, t["shape"][0]])))
    return repr(t["name"]), "shape"


def _offsets_disagree(doc, data):
    """cu_seqlens_kv describes another number of sequences than cu_seqlens_q."""
    t = _offsets(doc, "cu_seqlens_kv")
    n = t["shape"][0]
    t["shape"] = [data.draw(st.integers(2, n + 4).filter(lambda m: m != n))]
    return "cu_seqlens_kv", repr(t["name"]), "shape"


def _side_not_ragged(doc, data):
    t = role(doc, data.draw(st.sampled_from(Q_SIDE_INPUTS + KV_SIDE_INPUTS)))
    t["ragged"] = None
    return repr(t["name"]), "ragged", ("value", None)


def _output_not_ragged(doc, data):
    t = role(doc, data.draw(st.sampled_from(("dq", "dk", "dv"))))
    t["ragged"] = None
    return repr(t["name"]), "ragged", ("value", None)


def _wrong_offsets(doc, data):
    """A q-side tensor ragged over cu_seqlens_kv, or a kv-side one over cu_seqlens_q."""
    r = data.draw(st.sampled_from(Q_SIDE_INPUTS + KV_SIDE_INPUTS))
    other = sdpa(doc)["inputs"]["cu_seqlens_q" if r in KV_SIDE_INPUTS else "cu_seqlens_kv"]
    t = role(doc, r)
    t["ragged"]["offsets"] = other
    return repr(t["name"]), "ragged.offsets", ("value", other)


def _max_len_disagrees(doc, data):
    r = data.draw(st.sampled_from(Q_SIDE_INPUTS[1:] + KV_SIDE_INPUTS[1:]))
    t = role(doc, r)
    t["ragged"]["max_len"] += data.draw(st.integers(1, 5))
    return repr(t["name"]), "ragged.max_len", ("value", t["ragged"]["max_len"])


def _negative_max_len(doc, data):
    t = role(doc, data.draw(st.sampled_from(Q_SIDE_INPUTS + KV_SIDE_INPUTS)))
    t["ragged"]["max_len"] = data.draw(st.integers(-(1 << 31), -1))
    return repr(t["name"]), "ragged.max_len", ("value", t["ragged"]["max_len"])


def _offsets_undeclared(doc, data):
    t = role(doc, data.draw(st.sampled_from(Q_SIDE_INPUTS + KV_SIDE_INPUTS)))
    names = {x["name"] for x in doc["tensors"]}
    missing = data.draw(st.text(min_size=1, max_size=8).filter(lambda n: n not in names))
    t["ragged"]["offsets"] = missing
    return repr(t["name"]), "ragged.offsets", ("value", missing)


def _ragged_rank(doc, data):
    """A ragged io tensor with a batch axis left on: (1, H, T, D)."""
    t = role(doc, data.draw(st.sampled_from(("q", "k", "v", "o", "do"))))
    t["shape"], t["strides"] = [1, *t["shape"]], None
    return repr(t["name"]), "shape"


def _ragged_sink(doc, data):
    """A sink given a token axis and made ragged: a side input of a packed op stays dense."""
    t = role(doc, "sink")
    t["shape"], t["strides"] = [t["shape"][0], 2], None
    t["ragged"] = {"offsets": sdpa(doc)["inputs"]["cu_seqlens_q"], "max_len": 1}
    return repr(t["name"]), "ragged"


def _ragged_in_dense_op(doc, data):
    """A tensor of an op without cu_seqlens made ragged over an offsets tensor of the graph."""
    offsets = data.draw(st.text(min_size=1, max_size=8).filter(lambda n: n not in {x["name"] for x in doc["tensors"]}))
    doc["tensors"].insert(0, {"name": offsets, "shape": [3], "strides": None, "dtype": "int32", "ragged": None})
    t = role(doc, data.draw(st.sampled_from(("k", "o", "do", "lse"))))
    t["ragged"] = {"offsets": offsets, "max_len": 1}
    return repr(t["name"]), "ragged"


CORRUPTIONS = (
    Corruption("Hq not a multiple of Hkv", _gqa),
    Corruption("head dims disagree", _head_dims),
    Corruption("lse not fp32", _not_fp32("lse")),
    Corruption("lse wrong shape", _lse_shape),
    Corruption("sink not fp32", _not_fp32("sink"), needs=("sink",)),
    Corruption("sink not (Hq,)", _sink_shape, needs=("sink",)),
    Corruption("seq_len not int32 (B,)", _seq_len, needs=("padded",)),
    Corruption("negative band bound", _negative_band),
    Corruption("attn_scale <= 0", _bad_scale),
    Corruption("mixed io dtypes", _mixed_dtypes),
    Corruption("strides that do not describe the shape", _bad_strides),
    Corruption("negative extent, or no head or head dim", _bad_extent),
    Corruption("unknown tensor reference", _unknown_ref),
    Corruption("duplicate tensor names", _duplicate),
    Corruption("dsink without sink", _dsink_without_sink, needs=("sink",), json_only=True),
    Corruption("sink without dsink", _sink_without_dsink, needs=("sink",), json_only=True),
    Corruption("output shape differs from its input", _output_shape, json_only=True),
    Corruption("cu_seqlens_q without cu_seqlens_kv or the reverse", _one_offsets_only, needs=("ragged",)),
    Corruption("offsets not int32", _offsets_dtype, needs=("ragged",)),
    Corruption("offsets not (B + 1,) with B >= 0", _offsets_shape, needs=("ragged",)),
    Corruption("cu_seqlens_q and cu_seqlens_kv count different sequences", _offsets_disagree, needs=("ragged",)),
    Corruption("q-side or kv-side input not ragged", _side_not_ragged, needs=("ragged",)),
    Corruption("gradient not ragged like its input", _output_not_ragged, needs=("ragged",), json_only=True),
    Corruption("ragged over the other side's offsets", _wrong_offsets, needs=("ragged",)),
    Corruption("max_len differs within a side", _max_len_disagrees, needs=("ragged",)),
    Corruption("negative max_len", _negative_max_len, needs=("ragged",)),
    Corruption("offsets naming no tensor", _offsets_undeclared, needs=("ragged",)),
    Corruption("ragged io tensor of rank 4", _ragged_rank, needs=("ragged",)),
    Corruption("ragged sink", _ragged_sink, needs=("ragged", "sink")),
    Corruption("ragged tensor in a dense op", _ragged_in_dense_op, needs=("dense",)),
)
