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
    needs: tuple[str, ...] = ()  # graph features it needs: "sink", "padded"
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


def reshape(t: dict, shape: tuple[int, ...]) -> None:
    """New shape, strides recomputed in the tensor's layout (so only the shape is wrong)."""
    bshd = t["strides"] is not None and len(t["shape"]) == 4 and len(shape) == 4
    t["shape"] = list(shape)
    if t["strides"] is not None:
        t["strides"] = list(layout_strides(tuple(shape), "bshd") if bshd else contiguous_strides(tuple(shape)))


def _gqa(doc, data):
    hq = role(doc, "q")["shape"][1]
    hkv = data.draw(st.integers(2, 2 * hq + 1).filter(lambda h: hq % h))
    for r in ("k", "v"):
        t = role(doc, r)
        reshape(t, (t["shape"][0], hkv, *t["shape"][2:]))
    return repr(role(doc, "k")["name"]), "shape[1]", ("value", hkv)


def _head_dims(doc, data):
    r = data.draw(st.sampled_from(("k", "o", "do")))
    t = role(doc, r)
    reshape(t, (*t["shape"][:3], t["shape"][3] + data.draw(st.integers(1, 64))))
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
    t = role(doc, data.draw(st.sampled_from(("q", "k", "v", "lse"))))
    t["shape"][data.draw(st.integers(0, len(t["shape"]) - 1))] = data.draw(st.integers(-3, 0))
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
    reshape(t, (*t["shape"][:3], t["shape"][3] + 1))
    return repr(t["name"]), "shape"


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
    Corruption("extent < 1", _bad_extent),
    Corruption("unknown tensor reference", _unknown_ref),
    Corruption("duplicate tensor names", _duplicate),
    Corruption("dsink without sink", _dsink_without_sink, needs=("sink",), json_only=True),
    Corruption("sink without dsink", _sink_without_dsink, needs=("sink",), json_only=True),
    Corruption("output shape differs from its input", _output_shape, json_only=True),
)
