"""Random valid graphs: JSON round-trip is the identity, and the builder rebuilds them from their JSON."""

from __future__ import annotations

import json

from hypothesis import given, settings

from frost.ir import Graph
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
