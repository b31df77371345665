"""Hypothesis strategies for valid sdpa_backward graphs (dense, or ragged: packed sequences over cu_seqlens), and a
replay of a graph's JSON form through GraphBuilder, so every graph (and every corruption of one) can be built both
ways."""

from __future__ import annotations

from hypothesis import strategies as st

from frost.ir import Graph, GraphBuilder, Ragged

IO_DTYPES = ("float16", "bfloat16", "float32", "float64")
ATTRS = ("attn_scale", "causal", "alignment", "band_left", "band_right", "deterministic")
NAME = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)
# GraphBuilder.op(op, name, inputs, outputs, **attrs) cannot take attrs named like its parameters
ATTR_KEY = st.text(max_size=6).filter(lambda k: k not in ("self", "op", "name", "inputs", "outputs"))
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)   # tuples are held as lists
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def graph_params(draw, sink: bool | None = None, padded: bool | None = None, ragged: bool | None = None) -> dict:
    """Sizes, dtype, layouts, optional inputs and op attributes of one valid graph. A ragged graph reads `batch`
    as the number of sequences and `sq` / `skv` as the packed token counts."""
    hkv, group = draw(st.integers(1, 16)), draw(st.sampled_from((1, 2, 4, 8)))
    return dict(
        batch=draw(st.integers(1, 64)), hq=hkv * group, hkv=hkv, sq=draw(st.integers(1, 1 << 17)),
        skv=draw(st.integers(1, 1 << 17)), dqk=draw(st.integers(1, 512)), dv=draw(st.integers(1, 512)),
        dtype=draw(st.sampled_from(IO_DTYPES)),
        layouts=draw(st.lists(st.sampled_from(("bhsd", "bshd")), min_size=5, max_size=5)),
        sink=draw(st.booleans()) if sink is None else sink,
        padded=draw(st.sampled_from(((), ("seq_len_q",), ("seq_len_kv",), ("seq_len_q", "seq_len_kv"))))
        if padded is None else (("seq_len_q", "seq_len_kv") if padded else ()),
        ragged=draw(st.booleans()) if ragged is None else ragged,
        max_len=(draw(st.integers(0, 1 << 17)), draw(st.integers(0, 1 << 17))),
        token_major_lse=draw(st.booleans()),
        names=draw(st.lists(NAME, min_size=14, max_size=14, unique=True)),
        attrs=dict(attn_scale=draw(st.none() | st.floats(1e-6, 1e3)), causal=draw(st.booleans()),
                   alignment=draw(st.sampled_from(("top_left", "bottom_right"))),
                   band_left=draw(st.none() | st.integers(0, 1 << 20)),
                   band_right=draw(st.none() | st.integers(0, 1 << 20)), deterministic=draw(st.booleans())),
        generic=draw(st.none() | st.dictionaries(ATTR_KEY, JSON_VALUE, max_size=3)),
    )


def build(p: dict) -> Graph:
    """The graph of `graph_params` output, declared with GraphBuilder."""
    n = p["names"]
    b = GraphBuilder(n[11])
    lead, raggeds, io = (p["batch"],), {}, {}
    if p["ragged"]:
        lead = ()
        for i, (field, side) in enumerate((("cu_seqlens_q", "q"), ("cu_seqlens_kv", "kv"))):
            io[field] = b.tensor(n[12 + i], (p["batch"] + 1,), "int32")
            raggeds[side] = Ragged(offsets=io[field], max_len=p["max_len"][i])
    shapes = {"q": (p["hq"], p["sq"], p["dqk"]), "k": (p["hkv"], p["skv"], p["dqk"]),
              "v": (p["hkv"], p["skv"], p["dv"]), "o": (p["hq"], p["sq"], p["dv"]), "do": (p["hq"], p["sq"], p["dv"])}
    for i, (role, shape) in enumerate(shapes.items()):
        io[role] = b.tensor(n[i], (*lead, *shape), p["dtype"], layout=p["layouts"][i],
                            ragged=raggeds.get("kv" if role in ("k", "v") else "q"))
    lse_strides = (1, p["hq"]) if p["ragged"] and p["token_major_lse"] else None
    io["lse"] = b.tensor(n[5], (*lead, p["hq"], p["sq"]), "float32", strides=lse_strides, ragged=raggeds.get("q"))
    if p["sink"]:
        io["sink"] = b.tensor(n[6], (p["hq"],), "float32")
    for i, role in enumerate(("seq_len_q", "seq_len_kv")):
        if role in p["padded"]:
            io[role] = b.tensor(n[7 + i], (p["batch"],), "int32")
    grads = b.sdpa_backward(**io, **p["attrs"], name=n[9])
    if p["generic"] is not None:
        out = b.tensor(n[10], (p["batch"],), "float32")
        b.op("all_reduce", f"{n[10]}/op", inputs=(grads.dq, grads.dk), outputs=(out,), **p["generic"])
    return b.build()


@st.composite
def valid_graphs(draw, **flags) -> Graph:
    return build(draw(graph_params(**flags)))


def replay(doc: dict) -> Graph:
    """Build the graph described by a JSON-form dict with GraphBuilder: tensors in their order, the
    sdpa_backward op where its first output appears (the builder declares its outputs), then other ops."""
    b = GraphBuilder(doc["name"])
    sdpa = [op for op in doc["ops"] if op["op"] == "sdpa_backward"]
    written = {name for op in sdpa for name in op["outputs"].values() if name is not None}
    pending = list(sdpa)
    for t in doc["tensors"]:
        if t["name"] in written:
            if pending and t["name"] in pending[0]["outputs"].values():
                op = pending.pop(0)
                ins = {role: name for role, name in op["inputs"].items() if name is not None}
                b.sdpa_backward(**ins, **{a: op[a] for a in ATTRS}, name=op["name"])
            continue
        strides = tuple(t["strides"]) if t["strides"] is not None else None
        ragged = Ragged(**t["ragged"]) if t.get("ragged") is not None else None
        b.tensor(t["name"], tuple(t["shape"]), t["dtype"], strides=strides, ragged=ragged)
    for op in doc["ops"]:
        if op["op"] != "sdpa_backward":
            b.op(op["op"], op["name"], tuple(op["inputs"]), tuple(op["outputs"]), **op["attrs"])
    return b.build()
