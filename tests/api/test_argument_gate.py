"""Every public call's arguments pass one gate: a wrong type or value at any parameter of any public call comes out
as a FrostError (never torch's or Python's own error), and a non-tensor mistake is named as the caller spelled the
parameter (a wrong value may be found against another argument: then both are named). Property-based:
hypothesis throws values of every kind at every parameter."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import frost
from frost.errors import ArgumentTypeError, FrostError, TensorError

B, S, HQ, HKV, D = 2, 8, 4, 2, 8
LENS = (5, 3)
T = sum(LENS)


def _dense():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, S, h, D, generator=g) for h in (HQ, HKV, HKV))
    out, lse = frost.sdpa_forward(q, k, v)
    return dict(q=q, k=k, v=v, out=out, dout=torch.randn_like(out), lse=lse)


def _packed():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(T, h, D, generator=g) for h in (HQ, HKV, HKV))
    cu = torch.tensor([0, LENS[0], T], dtype=torch.int32)
    out, lse = frost.sdpa_forward_varlen(q, k, v, cu, cu, max(LENS), max(LENS))
    return dict(q=q, k=k, v=v, out=out, dout=torch.randn_like(out), lse=lse, cu_seqlens_q=cu, cu_seqlens_kv=cu,
                max_seqlen_q=max(LENS), max_seqlen_kv=max(LENS))


DENSE, PACKED = _dense(), _packed()
OPTIONS = ("softmax_scale", "causal", "window_size", "causal_alignment")
# call -> (function, valid arguments by parameter name, the parameters to corrupt)
CALLS = {
    "attention": (frost.attention, DENSE, ("q", "k", "v"), (*OPTIONS, "seq_len_q", "seq_len_kv", "sink",
                                                            "return_lse", "deterministic")),
    "sdpa_forward": (frost.sdpa_forward, DENSE, ("q", "k", "v"), (*OPTIONS, "seq_len_q", "seq_len_kv", "sink")),
    "sdpa_backward": (frost.sdpa_backward, DENSE, ("q", "k", "v", "out", "dout", "lse"),
                      (*OPTIONS, "seq_len_q", "seq_len_kv", "sink", "deterministic", "dlse")),
    "attention_varlen": (frost.attention_varlen, PACKED,
                         ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_kv", "max_seqlen_q", "max_seqlen_kv"),
                         (*OPTIONS, "seqused_q", "seqused_kv", "sink", "return_lse", "deterministic")),
    "sdpa_forward_varlen": (frost.sdpa_forward_varlen, PACKED,
                            ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_kv", "max_seqlen_q", "max_seqlen_kv"),
                            (*OPTIONS, "seqused_q", "seqused_kv", "sink")),
    "sdpa_backward_varlen": (frost.sdpa_backward_varlen, PACKED,
                             ("q", "k", "v", "out", "dout", "lse", "cu_seqlens_q", "cu_seqlens_kv", "max_seqlen_q",
                              "max_seqlen_kv"),
                             (*OPTIONS, "seqused_q", "seqused_kv", "sink", "deterministic", "dlse")),
}

_TENSORS = st.sampled_from([torch.zeros(()), torch.zeros(3), torch.ones(B, dtype=torch.int32),
                            torch.ones(HQ), torch.zeros(B, S, HQ, D, dtype=torch.float64),
                            torch.zeros(2, 3, dtype=torch.int64), torch.tensor(0.1), torch.tensor([1.5, 2.0])])
WRONG = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.sampled_from([0.0, -1.0, 0.5, math.nan, math.inf, 1e300]),
    st.text(max_size=6), st.sampled_from(["top_left", "bottom_right", "yes", "True"]),
    st.lists(st.integers(-3, 3), max_size=3), st.tuples(st.integers(-3, 3), st.integers(-3, 3)),
    st.tuples(st.floats(allow_nan=True), st.none()), st.tuples(st.text(max_size=2), st.booleans()),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2), st.just(object()), st.just(1j),
    st.just(np.float32(0.25)), st.just(np.bool_(True)), st.just(np.int64(3)), st.just(np.zeros(3)), _TENSORS,
)


@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=st.sampled_from(sorted(CALLS)), data=st.data())
def test_wrong_arguments_raise_nothing_but_frost_errors(call, data):
    fn, valid, positional, keywords = CALLS[call]
    param = data.draw(st.sampled_from((*positional, *keywords)), label="parameter")
    value = data.draw(WRONG, label="value")
    args = [valid[p] for p in positional]
    kwargs = {}
    if param in positional:
        args[positional.index(param)] = value
    else:
        kwargs[param] = value
    try:
        fn(*args, **kwargs)
    except ArgumentTypeError as exc:   # a wrong type is always named as the caller spelled the parameter
        assert str(exc).startswith(f"{param}: got "), f"{call}({param}={value!r}) raised {exc!r}"
    except FrostError as exc:          # a wrong value may be found against another argument, which names it
        if not isinstance(value, torch.Tensor):
            assert param in str(exc), f"{call}({param}={value!r}) raised {exc!r}"


@pytest.mark.parametrize("param, value", [
    ("seq_len_q", [24, 10]), ("softmax_scale", "0.1"), ("sink", [0.0] * HQ), ("causal_alignment", True),
    ("return_lse", "yes"), ("softmax_scale", torch.tensor(0.1)), ("causal", 1), ("deterministic", "no"),
    ("window_size", 3), ("window_size", (1, 2, 3)), ("window_size", (True, None)),
])
def test_the_reported_mistakes_are_type_errors_named_as_spelled(param, value):
    d = DENSE
    with pytest.raises(ArgumentTypeError if param != "window_size" or not isinstance(value, tuple) or len(value) == 2
                       else TensorError) as info:
        frost.attention(d["q"], d["k"], d["v"], **{param: value})
    assert str(info.value).startswith(f"{param}: got ")
    assert isinstance(info.value, TypeError) == isinstance(info.value, ArgumentTypeError)


OP_VALUES = [  # values the ops' schemas admit but frost does not
    ("causal_alignment", "bottom-right"), ("softmax_scale", math.nan), ("softmax_scale", -1.0),
    ("max_seqlen_q", -1), ("cu_seqlens_kv", None),
]


@pytest.mark.parametrize("param, value", OP_VALUES)
def test_the_torch_ops_called_directly_pass_the_same_gate(param, value):
    p = PACKED
    args = dict(q=p["q"], k=p["k"], v=p["v"], cu_seqlens_q=p["cu_seqlens_q"], cu_seqlens_kv=p["cu_seqlens_kv"],
                max_seqlen_q=5, max_seqlen_kv=5, seq_len_q=None, seq_len_kv=None, sink=None, softmax_scale=None,
                causal=True, window_left=None, window_right=None, causal_alignment="top_left")
    args[param] = value
    with pytest.raises(FrostError) as info:
        torch.ops.frost.attention_forward(*args.values())
    assert str(info.value).startswith(param)
    backward = dict(args, out=p["out"], dout=p["dout"], lse=p["lse"])
    order = ("q", "k", "v", "out", "dout", "lse", "cu_seqlens_q", "cu_seqlens_kv", "max_seqlen_q", "max_seqlen_kv",
             "seq_len_q", "seq_len_kv", "sink", "softmax_scale", "causal", "window_left", "window_right",
             "causal_alignment")
    with pytest.raises(FrostError):
        torch.ops.frost.attention_backward(*(backward[n] for n in order), False)
