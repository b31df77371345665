"""GraphBuilder and sdpa_backward_graph produce the graph the arguments describe; `frost schema` prints it."""

from __future__ import annotations

import json

import pydantic
import pytest

import frost.cli
from frost.errors import GraphError
from frost.ir import Graph, GraphBuilder, SdpaBackwardOp, sdpa_backward_graph
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
