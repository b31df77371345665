"""Random malformed graphs raise frost.GraphError naming the tensor/attribute — built with GraphBuilder and
loaded from JSON alike."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost.errors import GraphError
from frost.ir import Graph
from ir_corruptions import CORRUPTIONS, Corruption
from ir_strategies import replay, valid_graphs


def assert_names(err: GraphError, expected: tuple) -> None:
    """The error's subject names the expected tensor/attribute, it reports the offending value, and its
    message says what is accepted."""
    for item in expected:
        if isinstance(item, tuple):
            assert err.value == item[1], f"value {err.value!r}, expected {item[1]!r}: {err}"
        else:
            assert item in err.subject, f"{item} not named in the subject {err.subject!r}"
    assert str(err).startswith(f"{err.subject}: got {err.value!r}; accepted: {err.accepted}"), str(err)


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=[c.name for c in CORRUPTIONS])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_malformed_graph_is_rejected(corruption: Corruption, data) -> None:
    ragged = True if "ragged" in corruption.needs else False if "dense" in corruption.needs else None
    graph = data.draw(valid_graphs(sink=True if "sink" in corruption.needs else None,
                                   padded=True if "padded" in corruption.needs else None, ragged=ragged))
    doc = json.loads(graph.model_dump_json())
    replay(doc)  # the uncorrupted graph builds
    expected = corruption.apply(doc, data)
    text = json.dumps(doc)
    for load in (Graph.from_json, Graph.model_validate_json):
        with pytest.raises(GraphError) as info:
            load(text)
        assert_names(info.value, expected)
    if not corruption.json_only:
        with pytest.raises(GraphError) as info:
            replay(doc)
        assert_names(info.value, expected)


@pytest.mark.parametrize("text, where", [
    ("{}", "tensors"),
    ('{"tensors": [], "ops": [], "colour": 1}', "colour"),
    ('{"tensors": [{"name": "x", "shape": [1], "dtype": "int8"}], "ops": []}', "dtype"),
    ("not json", "graph"),
])
def test_structurally_broken_json_raises_graph_error(text: str, where: str) -> None:
    with pytest.raises(GraphError) as info:
        Graph.from_json(text)
    assert where in str(info.value)
