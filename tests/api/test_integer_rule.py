"""One rule for integer arguments at every layer that takes them (the graph builder's shapes and sizes, the mask's
bounds, the calls' window_size and max_seqlen): a Python or numpy integer passes; a bool, a float, a string or a
tensor is refused with frost's error for that layer, never truncated, parsed or read back."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import frost
from frost import spec
from frost.errors import ArgumentTypeError, GraphError, TensorError

NOT_INTS = [True, np.bool_(False), 2.0, np.float32(2.0), "2", torch.tensor(2), None]
INTS = [2, np.int64(2), np.int32(2), np.uint8(2)]


def _q_k_v(tokens=None):
    shape = (tokens, 2, 8) if tokens else (1, 4, 2, 8)
    return (torch.randn(shape) for _ in range(3))


LAYERS = {
    "builder shape": (GraphError, lambda n: frost.GraphBuilder("g").tensor("q", (1, n, 4, 8), "bfloat16")),
    "graph size": (GraphError, lambda n: frost.sdpa_forward_graph(1, 2, n, 8)),
    "mask bound": (TensorError, lambda n: spec.caller_mask(False, "top_left", n, None)),
    "window_size": (ArgumentTypeError, lambda n: frost.sdpa_forward(*_q_k_v(), window_size=(n, 0))),
    "max_seqlen": (ArgumentTypeError, lambda n: frost.sdpa_forward_varlen(
        *_q_k_v(2), torch.tensor([0, 2], dtype=torch.int32), torch.tensor([0, 2], dtype=torch.int32), n, 2)),
}


@pytest.mark.parametrize("value", INTS, ids=repr)
def test_integers_of_any_kind_read_as_ints(value):
    assert spec.as_int(value) == 2 and type(spec.as_int(value)) is int


@pytest.mark.parametrize("value", NOT_INTS, ids=repr)
def test_nothing_else_reads_as_an_int(value):
    assert spec.as_int(value) is None


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("value", INTS, ids=repr)
def test_every_layer_takes_numpy_integers(layer, value):
    LAYERS[layer][1](value)


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("value", [v for v in NOT_INTS if v is not None], ids=repr)
def test_every_layer_refuses_what_is_not_an_int(layer, value):
    error, call = LAYERS[layer]
    with pytest.raises(error) as info:
        call(value)
    assert repr(value) in str(info.value) or str(value) in str(info.value)
