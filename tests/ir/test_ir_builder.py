"""GraphBuilder and sdpa_backward_graph produce the graph the arguments describe; `frost schema` prints it."""

from __future__ import annotations

import json
import re

import pydantic
import pytest

import frost.cli
from frost.errors import GraphError
from frost.ir import Graph, GraphBuilder, SdpaBackwardOp, sdpa_backward_graph, sdpa_forward_graph
from frost.ir.builder import sdpa_backward_varlen_graph, sdpa_forward_varlen_graph
from frost.spec import Mask


def bshd_strides(b: int, h: int, s: int, d: int) -> tuple[int, ...]:
    """Strides of a logical (B, H, S, D) view of contiguous (B, S, H, D) memory."""
    return (s * h * d, d, h * d, 1)


def test_one_call_graph_declares_every_tensor() -> None:
    g = sdpa_backward_graph(2, 8, 128, 64, heads_kv=2, seq_kv=96, head_dim_v=32, sink=True, padded=True,
                            dlse=True, causal=True, alignment="bottom_right", band_left=16)
    specs = {t.name: (t.shape, t.dtype, t.strides) for t in g.tensors}
    assert specs == {
        "q": ((2, 8, 128, 64), "bfloat16", bshd_strides(2, 8, 128, 64)),
        "k": ((2, 2, 96, 64), "bfloat16", bshd_strides(2, 2, 96, 64)),
        "v": ((2, 2, 96, 32), "bfloat16", bshd_strides(2, 2, 96, 32)),
        "o": ((2, 8, 128, 32), "bfloat16", bshd_strides(2, 8, 128, 32)),
        "do": ((2, 8, 128, 32), "bfloat16", bshd_strides(2, 8, 128, 32)),
        "lse": ((2, 8, 128), "float32", None),
        "sink": ((8,), "float32", None),
        "dlse": ((2, 8, 128), "float32", None),
        "seq_len_q": ((2,), "int32", None),
        "seq_len_kv": ((2,), "int32", None),
        "attn.dq": ((2, 8, 128, 64), "bfloat16", bshd_strides(2, 8, 128, 64)),
        "attn.dk": ((2, 2, 96, 64), "bfloat16", bshd_strides(2, 2, 96, 64)),
        "attn.dv": ((2, 2, 96, 32), "bfloat16", bshd_strides(2, 2, 96, 32)),
        "attn.dsink": ((8,), "float32", None),
    }
    (op,) = g.ops
    assert isinstance(op, SdpaBackwardOp) and g.sdpa_ops() == [op] and op.name == "attn"
    assert op.inputs.model_dump() == {"q": "q", "k": "k", "v": "v", "o": "o", "do": "do", "lse": "lse",
                                      "sink": "sink", "dlse": "dlse", "seq_len_q": "seq_len_q",
                                      "seq_len_kv": "seq_len_kv", "cu_seqlens_q": None, "cu_seqlens_kv": None}
    assert op.outputs.model_dump() == {"dq": "attn.dq", "dk": "attn.dk", "dv": "attn.dv", "dsink": "attn.dsink"}
    assert (op.causal, op.alignment, op.mask) == (True, "bottom_right", Mask(16, 0, "bottom_right"))
    assert op.mask.kind == "band"
    assert (op.attn_scale, op.deterministic) == (None, False)


def test_builder_reads_like_the_math() -> None:
    b = GraphBuilder("mine")
    q = b.tensor("Q", (1, 4, 16, 40), "float16", strides=(4 * 16 * 40, 40, 4 * 40, 1))
    k = b.tensor("K", (1, 1, 16, 40), "float16", layout="bshd")
    v = b.tensor("V", (1, 1, 16, 40), "float16")
    o, do = b.tensor("O", (1, 4, 16, 40), "float16"), b.tensor("dO", (1, 4, 16, 40), "float16")
    lse = b.tensor("LSE", (1, 4, 16), "float32")
    grads = b.sdpa_backward(q, k, v, o, do, lse, attn_scale=0.5, deterministic=True, name="sdpa")
    total = b.tensor("total", (1,), "float32")
    b.op("sum", "reduce", inputs=(grads.dq,), outputs=(total,), axis=3)
    g = b.build()
    assert (grads.dq, grads.dk, grads.dv, grads.dsink) == ("sdpa.dq", "sdpa.dk", "sdpa.dv", None)
    assert [t.name for t in g.tensors] == ["Q", "K", "V", "O", "dO", "LSE", "sdpa.dq", "sdpa.dk", "sdpa.dv", "total"]
    assert g.tensor("sdpa.dq").strides == g.tensor("Q").strides == (4 * 16 * 40, 40, 4 * 40, 1)
    assert g.tensor("K").strides == bshd_strides(1, 1, 16, 40) and g.tensor("V").strides is None
    assert g.tensor("V").effective_strides == (16 * 40, 16 * 40, 40, 1)
    assert [op.name for op in g.ops] == ["sdpa", "reduce"] and g.ops[1].attrs == {"axis": 3}
    assert g.sdpa_ops()[0].attn_scale == 0.5 and g.sdpa_ops()[0].mask.kind == "none"
    assert set(g.tensor_map()) == {t.name for t in g.tensors}
    with pytest.raises(KeyError):
        g.tensor("nope")
    with pytest.raises(pydantic.ValidationError):
        g.name = "renamed"  # graphs are immutable


@pytest.mark.parametrize("attrs, kind, band", [
    (dict(), "none", (None, None)),
    (dict(causal=True), "causal", (None, 0)),
    (dict(causal=True, band_right=4), "band", (None, 4)),
    (dict(band_left=0), "band", (0, None)),
    (dict(band_left=7, band_right=0), "band", (7, 0)),
])
def test_mask_kind_follows_causal_and_band(attrs, kind, band) -> None:
    mask = sdpa_backward_graph(1, 2, 8, 16, **attrs).sdpa_ops()[0].mask
    assert (mask.kind, (mask.left, mask.right)) == (kind, band)


def _inputs(b: GraphBuilder) -> tuple[str, ...]:
    return tuple(b.tensor(n, (1, 2, 8, 16), "float16") for n in ("q", "k", "v", "o", "do")) + \
        (b.tensor("lse", (1, 2, 8), "float32"),)


def test_builder_rejects_unknown_and_duplicate_names() -> None:
    b = GraphBuilder()
    q, k, v, o, do, lse = _inputs(b)
    with pytest.raises(GraphError, match="'kk'"):
        b.sdpa_backward(q, "kk", v, o, do, lse, name="a")
    with pytest.raises(GraphError, match="tensor name: got 'q'"):
        b.tensor("q", (1, 2, 8, 16), "float16")
    b.tensor("a.dq", (1, 2, 8, 16), "float16")  # collides with the output the op would declare
    with pytest.raises(GraphError, match="'a.dq'"):
        b.sdpa_backward(q, k, v, o, do, lse, name="a")


def test_schema_command_prints_the_graph_json_schema(capsys, tmp_path) -> None:
    assert frost.cli.main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == json.loads(json.dumps(Graph.model_json_schema()))
    assert {"tensors", "ops"} <= set(schema["properties"]) and "SdpaBackwardOp" in schema["$defs"]
    assert frost.cli.main(["schema", "--output", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text()) == schema


def test_dlse_must_be_fp32_and_shaped_like_lse() -> None:
    import pytest

    from frost.errors import GraphError

    for shape, dtype, what in (((2, 8, 64), "float32", "shape"), ((2, 8, 128), "bfloat16", "dtype")):
        b = GraphBuilder("g")
        names = [b.tensor(n, (2, 8, 128, 64), "bfloat16") for n in ("q", "k", "v", "o", "do")]
        lse = b.tensor("lse", (2, 8, 128), "float32")
        dlse = b.tensor("dlse", shape, dtype)
        with pytest.raises(GraphError, match=rf"dlse.*{what}"):
            b.sdpa_backward(*names, lse, dlse=dlse)
            b.build()


ONE_CALL = {
    "sdpa_backward_graph": lambda **kw: sdpa_backward_graph(**{"batch": 2, "heads_q": 4, "seq_q": 16, "head_dim": 64,
                                                              **kw}),
    "sdpa_forward_graph": lambda **kw: sdpa_forward_graph(**{"batch": 2, "heads_q": 4, "seq_q": 16, "head_dim": 64,
                                                            **kw}),
    "sdpa_backward_varlen_graph": lambda **kw: sdpa_backward_varlen_graph(
        **{"batch": 2, "heads_q": 4, "tokens_q": 16, "max_len_q": 8, "head_dim": 64, **kw}),
    "sdpa_forward_varlen_graph": lambda **kw: sdpa_forward_varlen_graph(
        **{"batch": 2, "heads_q": 4, "tokens_q": 16, "max_len_q": 8, "head_dim": 64, **kw}),
}


@pytest.mark.parametrize("function", sorted(ONE_CALL))
@pytest.mark.parametrize("argument, value, accepted", [
    ("heads_kv", 0, "an int >= 1"),           # never "not given": a zero head count is a mistake
    ("head_dim_v", 0, "an int >= 1"),
    ("heads_q", 0, "an int >= 1"),
    ("batch", -1, "an int >= 0"),
    ("batch", 2.5, "an int >= 0"),            # never truncated
    ("head_dim", "64", "an int >= 1"),        # never parsed
    ("heads_kv", True, "an int >= 1"),        # a bool is not a count
    ("heads_kv", 3, "a divisor of heads_q = 4"),
])
def test_one_call_graphs_name_a_bad_size_argument(function, argument, value, accepted) -> None:
    with pytest.raises(GraphError, match=rf"^{argument}: got {re.escape(repr(value))}; accepted: {accepted}"):
        ONE_CALL[function](**{argument: value})


@pytest.mark.parametrize("function, argument, where", [
    ("sdpa_backward_graph", "seq_kv", ("k", 2)),
    ("sdpa_forward_graph", "seq_kv", ("v", 2)),
    ("sdpa_backward_varlen_graph", "tokens_kv", ("k", 1)),
    ("sdpa_forward_varlen_graph", "tokens_kv", ("v", 1)),
])
def test_an_empty_kv_side_is_a_size_not_the_default(function, argument, where) -> None:
    """0 keys (an empty problem) stays 0; it never falls back to the query side's extent."""
    name, axis = where
    assert ONE_CALL[function](**{argument: 0}).tensor_map()[name].shape[axis] == 0


@pytest.mark.parametrize("shape", [(2.5, 3), ("2", 3), (True, 3), "23", 5])
def test_builder_tensor_takes_int_shapes_only(shape) -> None:
    with pytest.raises(GraphError, match=r"^tensor 'x'\.shape: got .*; accepted: a tuple of ints"):
        GraphBuilder().tensor("x", shape, "float32")


def test_builder_tensor_takes_numpy_integers() -> None:
    np = pytest.importorskip("numpy")
    b = GraphBuilder()
    b.tensor("x", (np.int64(2), np.int32(3)), "float32")
    assert b.build().tensor_map()["x"].shape == (2, 3)


@pytest.mark.parametrize("scale, ok", [(3.4e38, True), (1e-300, True), (3.5e38, False), (1e300, False)])
def test_attn_scale_is_a_float_fp32_holds(scale, ok) -> None:
    """The largest fp32 passes; a scale fp32 turns into inf is refused (a tiny one rounds towards the uniform
    softmax it tends to, so it passes)."""
    if ok:
        assert sdpa_backward_graph(1, 2, 8, 16, attn_scale=scale).sdpa_ops()[0].attn_scale == scale
    else:
        with pytest.raises(GraphError, match=r"attn_scale: got .*; accepted: None \(1/sqrt\(Dqk\)\) or a float > 0"):
            sdpa_backward_graph(1, 2, 8, 16, attn_scale=scale)
