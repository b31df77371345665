"""frost's errors cross process boundaries as themselves: a worker's TensorError (multiprocessing, a distributed
launcher's error file) unpickles to the same type, message and attributes on the other side, instead of failing
in the constructor there and hiding the message."""

from __future__ import annotations

import pickle

import pytest
import torch

import frost
from frost.errors import UnknownOp
from frost.integrations import TRANSFORMERS_MIN


def _raised(call) -> frost.FrostError:
    with pytest.raises(frost.FrostError) as info:
        call()
    return info.value


def _not_supported() -> frost.NotSupported:
    graph = frost.sdpa_backward_graph(1, 2, 8, 16, dtype="float32")
    return _raised(lambda: frost.compile(graph, target="sm_90", engine="cute_sm120"))


def _adapter_error() -> frost.FrostError:
    """The transformers adapter's errors live in its package, which needs transformers (a test extra)."""
    pytest.importorskip("transformers", minversion=TRANSFORMERS_MIN)
    from frost.integrations.transformers.errors import UnsupportedAttentionMask

    return UnsupportedAttentionMask("attention_mask", "a 4-D mask", "None")


ERRORS = {
    "TensorError": lambda: _raised(lambda: frost.sdpa_forward(*(torch.randn(1, 4, 2, 8) for _ in range(3)),
                                                              softmax_scale=-1.0)),
    "ArgumentTypeError": lambda: _raised(lambda: frost.sdpa_forward(*(torch.randn(1, 4, 2, 8) for _ in range(3)),
                                                                    causal=1)),
    "GraphError": lambda: _raised(lambda: frost.sdpa_backward_graph(1, 2, 8, 16, heads_kv=0)),
    "UnknownOp": lambda: UnknownOp("sdpa_backwrd", ("sdpa_backward", "sdpa_forward")),
    "EngineError": lambda: _raised(lambda: frost.check_support(frost.sdpa_backward_graph(1, 2, 8, 16), engine="x")),
    "TargetError": lambda: _raised(lambda: frost.check_support(frost.sdpa_backward_graph(1, 2, 8, 16), "gpu")),
    "NotSupported": _not_supported,
    "UnsupportedAttentionMask": _adapter_error,
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_an_error_survives_pickling(name):
    error = ERRORS[name]()
    assert type(error).__name__ == name
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert {k: v for k, v in vars(back).items() if k != "report"} == \
        {k: v for k, v in vars(error).items() if k != "report"}


def test_not_supported_keeps_its_report():
    error = _not_supported()
    back = pickle.loads(pickle.dumps(error))
    assert back.report is not None and back.report.to_text() == error.report.to_text()
