"""The IR takes only what it implements: known layouts, exact booleans, integers and enum strings (no "yes" for
True), and a misspelt structured op is named as such. The IR imports nothing above it."""

from __future__ import annotations

import ast
import json
import pathlib

import pytest

from frost.errors import GraphError, UnknownOp
from frost.ir import Graph, GraphBuilder, sdpa_backward_graph

IR_DIR = pathlib.Path(__file__).resolve().parents[2] / "frost" / "ir"


@pytest.mark.parametrize("layout", ["sbhd", "nonsense", "BSHD"])
def test_builder_refuses_a_layout_it_does_not_implement(layout):
    with pytest.raises(GraphError) as info:
        GraphBuilder().tensor("q", (1, 2, 8, 16), "float16", layout=layout)
    assert info.value.value == layout and "'bhsd' or 'bshd'" in str(info.value) and "layout" in info.value.subject


def test_the_one_call_graph_refuses_an_unknown_layout():
    with pytest.raises(GraphError, match="layout: got 'sbhd'"):
        sdpa_backward_graph(1, 2, 8, 16, layout="sbhd")


def _doc(**op_changes) -> dict:
    doc = json.loads(sdpa_backward_graph(1, 2, 8, 16).model_dump_json())
    doc["ops"][0].update(op_changes)
    return doc


def test_a_misspelt_op_says_unknown_op_and_lists_the_known_ones():
    with pytest.raises(UnknownOp) as info:
        Graph.from_json(json.dumps(_doc(op="sdpa_bakward")))
    assert str(info.value).startswith("unknown op 'sdpa_bakward'; known: sdpa_backward")
    assert isinstance(info.value, GraphError)


def test_named_inputs_under_another_op_kind_are_an_unknown_op():
    with pytest.raises(UnknownOp, match="unknown op 'attention_bwd'"):
        Graph.from_json(json.dumps(_doc(op="attention_bwd")))


def test_a_generic_op_with_list_ports_is_still_accepted():
    b = GraphBuilder()
    x = b.tensor("x", (4,), "float32")
    b.op("relu", "act", inputs=(x,), outputs=(b.tensor("y", (4,), "float32"),))
    assert b.build().ops[0].op == "relu"
    with pytest.raises(UnknownOp):
        GraphBuilder().op("sdpa_backwards", "typo")


@pytest.mark.parametrize("field, value", [
    ("causal", "yes"), ("causal", 1), ("deterministic", "true"), ("band_left", "5"), ("band_left", 2.0),
    ("band_right", True), ("attn_scale", "0.5"), ("attn_scale", True), ("alignment", "bottom-right"),
])
def test_json_attributes_are_strict(field, value):
    with pytest.raises(GraphError) as info:
        Graph.from_json(json.dumps(_doc(**{field: value})))
    assert field in info.value.subject and info.value.value == value


@pytest.mark.parametrize("kwargs", [{"causal": "yes"}, {"band_left": 2.5}, {"deterministic": 1}])
def test_builder_attributes_are_strict(kwargs):
    with pytest.raises(GraphError) as info:
        sdpa_backward_graph(1, 2, 8, 16, **kwargs)
    assert next(iter(kwargs)) in info.value.subject


def test_shapes_take_integers_only():
    doc = _doc()
    doc["tensors"][0]["shape"] = [1, 2, 8.5, 16]
    with pytest.raises(GraphError, match="shape"):
        Graph.from_json(json.dumps(doc))


def test_an_integer_scale_is_a_scale():
    graph = Graph.from_json(json.dumps(_doc(attn_scale=1)))
    assert graph.sdpa_ops()[0].attn_scale == 1.0


def _frost_imports(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "frost" or m.startswith("frost.")}


@pytest.mark.parametrize("path", sorted(IR_DIR.glob("*.py")), ids=lambda p: p.name)
def test_the_ir_imports_nothing_above_it(path):
    base = ("frost.errors", "frost.spec")   # pure-Python declarations every layer reads
    above = {m for m in _frost_imports(path) if not (m.startswith("frost.ir") or m in base)}
    assert not above, f"{path.name} imports {sorted(above)}"
