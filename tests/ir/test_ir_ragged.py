"""Ragged (packed variable-length) graphs: the builder declares them, the JSON round trip is the identity, and a
packed forward is validated like a packed backward (the backward's corruptions live in ir_corruptions.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings

from frost.errors import GraphError
from frost.ir import (Graph, GraphBuilder, Ragged, SdpaBackwardOp, SdpaForwardOp, sdpa_backward_graph,
                      sdpa_backward_varlen_graph, sdpa_forward_varlen_graph)
from ir_strategies import replay, valid_graphs


def thd(h: int, t: int, d: int) -> tuple[int, int, int]:
    """Strides of a logical (H, T, D) view of contiguous packed (T, H, D) memory."""
    return (d, h * d, 1)


def test_one_call_backward_declares_ragged_tensors():
    g = sdpa_backward_varlen_graph(3, 8, 100, 50, 64, heads_kv=2, tokens_kv=120, max_len_kv=60, head_dim_v=32,
                                   sink=True, seqused=True, dlse=True, causal=True)
    rq, rkv = Ragged(offsets="cu_seqlens_q", max_len=50), Ragged(offsets="cu_seqlens_kv", max_len=60)
    specs = {t.name: (t.shape, t.dtype, t.strides, t.ragged) for t in g.tensors}
    assert specs == {
        "cu_seqlens_q": ((4,), "int32", None, None), "cu_seqlens_kv": ((4,), "int32", None, None),
        "seq_len_q": ((3,), "int32", None, None), "seq_len_kv": ((3,), "int32", None, None),
        "q": ((8, 100, 64), "bfloat16", thd(8, 100, 64), rq), "k": ((2, 120, 64), "bfloat16", thd(2, 120, 64), rkv),
        "v": ((2, 120, 32), "bfloat16", thd(2, 120, 32), rkv), "o": ((8, 100, 32), "bfloat16", thd(8, 100, 32), rq),
        "do": ((8, 100, 32), "bfloat16", thd(8, 100, 32), rq), "lse": ((8, 100), "float32", None, rq),
        "sink": ((8,), "float32", None, None), "dlse": ((8, 100), "float32", None, rq),
        "attn.dq": ((8, 100, 64), "bfloat16", thd(8, 100, 64), rq),
        "attn.dk": ((2, 120, 64), "bfloat16", thd(2, 120, 64), rkv),
        "attn.dv": ((2, 120, 32), "bfloat16", thd(2, 120, 32), rkv), "attn.dsink": ((8,), "float32", None, None),
    }
    (op,) = g.ops
    assert isinstance(op, SdpaBackwardOp) and op.ragged
    assert (op.inputs.cu_seqlens_q, op.inputs.cu_seqlens_kv) == ("cu_seqlens_q", "cu_seqlens_kv")


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_forward_output_is_laid_out_like_q_and_lse_is_head_major(layout):
    g = sdpa_forward_varlen_graph(2, 4, 30, 20, 16, heads_kv=2, head_dim_v=8, layout=layout)
    (op,) = g.ops
    assert isinstance(op, SdpaForwardOp) and op.ragged
    o, lse = g.tensor("attn.o"), g.tensor("attn.lse")
    assert o.shape == (4, 30, 8) and o.ragged == g.tensor("q").ragged
    assert o.effective_strides == (thd(4, 30, 8) if layout == "bshd" else (240, 8, 1))
    assert lse.shape == (4, 30) and lse.dtype == "float32" and lse.effective_strides == (30, 1)
    assert lse.ragged == Ragged(offsets="cu_seqlens_q", max_len=20)


def test_dense_graphs_stay_dense():
    g = sdpa_backward_graph(2, 4, 30, 16, sink=True, padded=True)
    (op,) = g.ops
    assert not op.ragged and all(t.ragged is None for t in g.tensors)
    assert json.loads(g.model_dump_json())["ops"][0]["inputs"]["cu_seqlens_q"] is None


def layer() -> Graph:
    """A packed forward and the backward that reads its o and lse, token-major lse included."""
    b = GraphBuilder("packed layer")
    cu_q, cu_kv = b.tensor("cu_q", (4,), "int32"), b.tensor("cu_kv", (4,), "int32")
    rq, rkv = Ragged(offsets=cu_q, max_len=9), Ragged(offsets=cu_kv, max_len=0)
    q = b.tensor("q", (4, 24, 16), "float32", layout="bshd", ragged=rq)
    k = b.tensor("k", (2, 30, 16), "float32", layout="bshd", ragged=rkv)
    v = b.tensor("v", (2, 30, 8), "float32", ragged=rkv)
    do = b.tensor("do", (4, 24, 8), "float32", layout="bshd", ragged=rq)
    sink, used = b.tensor("sink", (4,), "float32"), b.tensor("used", (3,), "int32")
    side = dict(sink=sink, seq_len_kv=used, cu_seqlens_q=cu_q, cu_seqlens_kv=cu_kv, causal=True, band_left=3,
                alignment="bottom_right")
    fwd = b.sdpa_forward(q, k, v, name="fwd", **side)
    b.sdpa_backward(q, k, v, fwd.o, do, fwd.lse, name="bwd", **side)
    return b.build()


def test_a_packed_layer_round_trips():
    g = layer()
    assert g.dataflow_order() == ["fwd", "bwd"]
    text = g.model_dump_json()
    assert Graph.from_json(text) == g and Graph.from_json(text).model_dump_json() == text
    assert json.loads(text)["tensors"][2]["ragged"] == {"offsets": "cu_q", "max_len": 9}


@settings(max_examples=80, deadline=None)
@given(graph=valid_graphs(ragged=True))
def test_ragged_json_round_trip_is_identity(graph: Graph) -> None:
    assert graph.sdpa_ops()[0].ragged
    text = graph.model_dump_json()
    assert Graph.model_validate_json(text) == graph
    assert Graph.from_json(text).model_dump_json() == text
    assert replay(json.loads(text)) == graph


def _doc(**changes):
    doc = json.loads(sdpa_forward_varlen_graph(3, 4, 24, 10, 16, heads_kv=2, sink=True, seqused=True)
                     .model_dump_json())
    for key, value in changes.items():
        where, _, field = key.rpartition(".")
        if where.startswith("tensor:"):
            target = next(t for t in doc["tensors"] if t["name"] == where[len("tensor:"):])
        else:
            target = doc["ops"][0]["inputs"] if where == "inputs" else doc["ops"][0]
        target[field] = value
    return doc


@pytest.mark.parametrize("changes, subject", [
    ({"inputs.cu_seqlens_kv": None}, "sdpa_forward 'attn'.inputs.cu_seqlens_kv"),
    ({"inputs.cu_seqlens_q": None}, "sdpa_forward 'attn'.inputs.cu_seqlens_q"),
    ({"inputs.cu_seqlens_q": None, "inputs.cu_seqlens_kv": None}, "q tensor 'q'.ragged"),   # ragged in a dense op
    ({"tensor:attn.o.ragged": None}, "o tensor 'attn.o'.ragged"),
    ({"tensor:attn.lse.ragged": {"offsets": "cu_seqlens_q", "max_len": 11}}, "lse tensor 'attn.lse'.ragged.max_len"),
    ({"tensor:v.ragged": {"offsets": "cu_seqlens_q", "max_len": 10}}, "v tensor 'v'.ragged.offsets"),
    ({"tensor:k.ragged": {"offsets": "nowhere", "max_len": 10}}, "tensor 'k'.ragged.offsets"),
    ({"tensor:cu_seqlens_kv.shape": [5]}, "cu_seqlens_kv tensor 'cu_seqlens_kv'.shape"),
    ({"tensor:cu_seqlens_q.dtype": "float32"}, "tensor 'cu_seqlens_q' (the offsets of ragged tensor 'q').dtype"),
    ({"tensor:seq_len_q.shape": [4]}, "seq_len_q tensor 'seq_len_q'.shape"),
    ({"tensor:attn.lse.shape": [4, 25]}, "lse tensor 'attn.lse'.shape"),
    ({"tensor:attn.lse.dtype": "bfloat16"}, "lse tensor 'attn.lse'.dtype"),
    ({"tensor:attn.o.shape": [4, 24, 8], "tensor:attn.o.strides": None}, "o tensor 'attn.o'.shape"),
    ({"tensor:q.shape": [1, 4, 24, 16], "tensor:q.strides": None}, "q tensor 'q'.shape"),
    ({"tensor:sink.shape": [2]}, "sink tensor 'sink'.shape"),
])
def test_packed_forward_checks_name_the_field(changes, subject):
    with pytest.raises(GraphError) as info:
        Graph.from_json(json.dumps(_doc(**changes)))
    assert str(info.value).startswith(subject), str(info.value)


def test_builder_names_the_rank_a_packed_op_needs():
    b = GraphBuilder()
    cu = b.tensor("cu", (3,), "int32")
    q = b.tensor("q", (1, 2, 8, 16), "bfloat16")
    with pytest.raises(GraphError, match=r"q tensor 'q'.shape: got \(1, 2, 8, 16\); accepted: rank 3"):
        b.sdpa_forward(q, q, q, cu_seqlens_q=cu, cu_seqlens_kv=cu)
