"""Random valid graphs: JSON round-trip is the identity, and the builder rebuilds them from their JSON."""

from __future__ import annotations

import json

import math
import re

import pytest
from hypothesis import given, settings

from frost.errors import GraphError
from frost.ir import Graph, GraphBuilder
from ir_strategies import replay, valid_graphs


@settings(max_examples=150, deadline=None)
@given(graph=valid_graphs())
def test_json_round_trip_is_identity(graph: Graph) -> None:
    text = graph.model_dump_json()
    assert Graph.model_validate_json(text) == graph
    assert Graph.from_json(text) == graph
    assert Graph.from_json(text.encode()) == graph
    assert Graph.model_validate(graph.model_dump()) == graph
    assert Graph.from_json(text).model_dump_json() == text


@settings(max_examples=60, deadline=None)
@given(graph=valid_graphs())
def test_builder_rebuilds_graph_from_its_json(graph: Graph) -> None:
    assert replay(json.loads(graph.model_dump_json())) == graph


@pytest.mark.parametrize("value, subject", [
    (math.nan, "attrs['x']"), (-math.inf, "attrs['x']"), ({"k": [1, math.nan]}, "attrs['x']['k'][1]"),
    ({1: "a"}, "attrs['x'] key"), (object(), "attrs['x']"),
])
def test_op_attrs_json_cannot_hold_are_refused(value, subject) -> None:
    """Generic-op attrs that JSON would change (NaN -> null) or cannot write are a GraphError naming the place."""
    b = GraphBuilder("g")
    t = b.tensor("t", (2,), "float32")
    with pytest.raises(GraphError, match=re.escape(f"op 'reduce' {subject}: got")):
        b.op("reduce", "reduce", inputs=(t,), outputs=(b.tensor("u", (2,), "float32"),), x=value)
        b.build()
