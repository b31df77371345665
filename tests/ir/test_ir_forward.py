"""The sdpa_forward op: built, validated like the backward, strict, JSON round trip, and a graph holding a forward
and the backward that reads its o and lse."""

from __future__ import annotations

import json

import pytest

from frost.errors import GraphError, UnknownOp
from frost.ir import Graph, GraphBuilder, SdpaBackwardOp, SdpaForwardOp, SdpaOp, sdpa_forward_graph
from frost.ir.tensors import layout_strides


def layer(order=("fwd", "bwd"), **mask):
    """q, k, v (GQA 4:2, sink, lengths) -> forward -> o, lse -> backward (with do) -> dq, dk, dv, dsink."""
    b = GraphBuilder("layer")
    q = b.tensor("q", (2, 4, 24, 16), "float32", layout="bshd")
    k = b.tensor("k", (2, 2, 30, 16), "float32", layout="bshd")
    v = b.tensor("v", (2, 2, 30, 8), "float32", layout="bshd")
    sink = b.tensor("sink", (4,), "float32")
    lq, lkv = b.tensor("lq", (2,), "int32"), b.tensor("lkv", (2,), "int32")
    do = b.tensor("do", (2, 4, 24, 8), "float32", layout="bshd")
    side = dict(sink=sink, seq_len_q=lq, seq_len_kv=lkv, **mask)
    fwd = b.sdpa_forward(q, k, v, name="fwd", **side)
    b.sdpa_backward(q, k, v, fwd.o, do, fwd.lse, name="bwd", **side)
    if order != ("fwd", "bwd"):
        b._ops.reverse()
    return b.build()


def test_builder_declares_o_like_q_and_an_fp32_lse():
    g = sdpa_forward_graph(2, 4, 24, 16, heads_kv=2, head_dim_v=8, sink=True, padded=True, causal=True)
    (op,) = g.sdpa_ops()
    assert isinstance(op, SdpaForwardOp) and isinstance(op, SdpaOp) and op.mask.kind == "causal"
    o, lse = g.tensor(op.outputs.o), g.tensor(op.outputs.lse)
    assert o.shape == (2, 4, 24, 8) and o.dtype == "bfloat16" and o.strides == layout_strides(o.shape, "bshd")
    assert lse.shape == (2, 4, 24) and lse.dtype == "float32"
    assert op.input_names() == ["q", "k", "v", "sink", "seq_len_q", "seq_len_kv"]
    assert op.output_names() == ["attn.o", "attn.lse"]
    bhsd = sdpa_forward_graph(1, 2, 8, 16, layout="bhsd")
    assert bhsd.tensor("attn.o").effective_strides == layout_strides((1, 2, 8, 16), "bhsd")


@pytest.mark.parametrize("order", [("fwd", "bwd"), ("bwd", "fwd")])
def test_a_forward_and_its_backward_in_one_graph(order):
    g = layer(order, causal=True, band_left=5)
    kinds = {op.name: type(op) for op in g.ops}
    assert kinds == {"fwd": SdpaForwardOp, "bwd": SdpaBackwardOp}
    assert g.dataflow_order() == ["fwd", "bwd"]          # the backward reads the forward's o and lse
    assert Graph.from_json(g.model_dump_json()) == g


def test_json_round_trip_is_the_identity():
    g = sdpa_forward_graph(2, 4, 24, 16, heads_kv=1, sink=True, padded=True, band_left=3, band_right=0,
                           alignment="bottom_right", attn_scale=0.25)
    text = g.model_dump_json()
    assert Graph.from_json(text).model_dump_json() == text
    assert json.loads(text)["ops"][0]["op"] == "sdpa_forward"


def _doc(**changes):
    doc = json.loads(sdpa_forward_graph(2, 4, 24, 16, heads_kv=2, sink=True, padded=True).model_dump_json())
    op = doc["ops"][0]
    for key, value in changes.items():
        target, _, field = key.rpartition(".")
        (op[target] if target else op)[field] = value
    return doc


@pytest.mark.parametrize("changes, subject", [
    ({"causal": "yes"}, "causal"),                      # strict: no truthy strings
    ({"band_left": 2.0}, "band_left"),
    ({"band_left": -1}, "band_left"),
    ({"attn_scale": 0.0}, "attn_scale"),
    ({"deterministic": True}, "deterministic"),         # a forward has no deterministic mode
    ({"inputs.dlse": "lse"}, "dlse"),                   # nor an LSE gradient
    ({"inputs.do": "q"}, "do"),
    ({"outputs.dq": "q"}, "dq"),
])
def test_strict_attributes_and_ports(changes, subject):
    with pytest.raises(GraphError, match=subject):
        Graph.from_json(json.dumps(_doc(**changes)))


def _tensor(doc, name, **changes):
    t = next(t for t in doc["tensors"] if t["name"] == name)
    t.update(changes)
    return doc


@pytest.mark.parametrize("name, changes, subject", [
    ("q", {"dtype": "int32"}, "q tensor 'q'.dtype"),
    ("k", {"dtype": "float16"}, "k tensor 'k'.dtype"),
    ("attn.o", {"dtype": "float16"}, "o tensor 'attn.o'.dtype"),
    ("k", {"shape": [2, 3, 24, 16], "strides": None}, "k tensor 'k'.shape[1]"),      # 3 does not divide 4
    ("k", {"shape": [2, 2, 24, 8], "strides": None}, "k tensor 'k'.shape[3]"),
    ("v", {"shape": [2, 2, 20, 16], "strides": None}, "v tensor 'v'.shape"),
    ("attn.o", {"shape": [2, 4, 24, 8], "strides": None}, "o tensor 'attn.o'.shape"),  # Dv is 16
    ("attn.lse", {"dtype": "bfloat16"}, "lse tensor 'attn.lse'.dtype"),
    ("attn.lse", {"shape": [2, 24, 4]}, "lse tensor 'attn.lse'.shape"),
    ("sink", {"shape": [2]}, "sink tensor 'sink'.shape"),
    ("seq_len_q", {"dtype": "float32"}, "seq_len_q tensor 'seq_len_q'.dtype"),
    ("seq_len_kv", {"shape": [3]}, "seq_len_kv tensor 'seq_len_kv'.shape"),
])
def test_tensor_checks_name_the_tensor(name, changes, subject):
    with pytest.raises(GraphError) as info:
        Graph.from_json(json.dumps(_tensor(_doc(), name, **changes)))
    assert str(info.value).startswith(subject), str(info.value)


def test_a_misspelt_forward_is_not_a_generic_op():
    doc = _doc(op="sdpa_forwrd")
    with pytest.raises(UnknownOp, match="sdpa_forward"):
        Graph.from_json(json.dumps(doc))
    with pytest.raises(GraphError, match="GraphBuilder.sdpa_forward"):
        GraphBuilder().op("sdpa_forward", "x")


def test_builder_refuses_undeclared_tensors():
    b = GraphBuilder()
    q = b.tensor("q", (1, 2, 8, 16), "bfloat16")
    with pytest.raises(GraphError, match="sdpa_forward 'attn' tensor reference"):
        b.sdpa_forward(q, "k", q, name="attn")


def test_a_second_writer_of_o_is_refused():
    b = GraphBuilder()
    q = b.tensor("q", (1, 2, 8, 16), "bfloat16")
    res = b.sdpa_forward(q, q, q, name="a")
    b.op("copy", "c", inputs=(q,), outputs=(res.o,))
    with pytest.raises(GraphError, match="written by"):
        b.build()
