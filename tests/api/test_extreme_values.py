"""Values at the far ends of what an argument's type holds: a window bound, a softmax scale or a max_seqlen past
int64 or float, a lone offsets tensor on a direct op call, a long value in a message. Each gives the result its
meaning implies (a bound past every key is no bound) or a frost error naming the argument, never a bare
OverflowError, a silently wrong output or a message as long as the value."""

from __future__ import annotations

import pytest
import torch

import frost
from frost.api.autograd import attention_forward_op
from frost.errors import ArgumentTypeError, GraphError, TensorError
from frost.ir import GraphBuilder

B, S, H, D = 1, 6, 2, 8


def _qkv(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, S, H, D, generator=g, dtype=torch.float64) for _ in range(3))  # type: ignore


@pytest.mark.parametrize("window, causal", [((None, 2**63 - 1), False), ((2**64, None), False),
                                            ((2**63 - 1, 2**70), False), ((2**70, None), True)])
def test_a_window_bound_past_every_key_is_no_bound(window, causal):
    """A right bound near 2**63 overflowed the reference mask's int64 arithmetic (rows lost every key: lse -inf,
    out 0) and one past 2**63 raised a bare OverflowError."""
    q, k, v = _qkv()
    out, lse = frost.sdpa_forward(q, k, v, causal=causal, window_size=window)
    want_out, want_lse = frost.sdpa_forward(q, k, v, causal=causal)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(lse, want_lse)


def test_a_graph_band_past_every_key_is_no_bound():
    q, k, v = _qkv(1)
    banded = frost.compile(frost.sdpa_forward_graph(B, H, S, D, dtype="float64", band_left=2**70, band_right=2**64),
                           target="cpu")
    plain = frost.compile(frost.sdpa_forward_graph(B, H, S, D, dtype="float64"), target="cpu")
    bhsd = {"q": q.transpose(1, 2), "k": k.transpose(1, 2), "v": v.transpose(1, 2)}   # logical shapes, BSHD memory
    got, want = (p.execute(bhsd) for p in (banded, plain))
    torch.testing.assert_close(got["attn.o"], want["attn.o"])


@pytest.mark.parametrize("scale", [10**309, -(10**400)], ids=["1e309", "-1e400"])
def test_a_scale_past_float_is_refused_in_a_short_message(scale):
    q, k, v = _qkv()
    with pytest.raises(TensorError, match=r"^softmax_scale: got -?\d{99,100}\.\.\. \(\d+ characters\); accepted: "):
        frost.sdpa_forward(q, k, v, softmax_scale=scale)


@pytest.mark.parametrize("max_seqlen", [2**63, 2**70])
def test_a_max_seqlen_past_int64_runs_as_declared(max_seqlen):
    """Each segment is within it: the offsets' check compared it with int64 values (an OverflowError at 2**70 and a
    message blaming cu_seqlens_q at 2**63)."""
    t = torch.randn(S, H, D, dtype=torch.float64)
    cu = torch.tensor([0, 2, S], dtype=torch.int32)
    out, _ = frost.sdpa_forward_varlen(t, t, t, cu, cu, max_seqlen, max_seqlen)
    want, _ = frost.sdpa_forward_varlen(t, t, t, cu, cu, 4, 4)
    torch.testing.assert_close(out, want)


def test_the_reference_takes_causal_as_a_bool_only():
    """A truthy string turned the reference's causal mask on."""
    q, k, v = _qkv()
    with pytest.raises(TensorError, match=r"^causal: got 'False'; accepted: True or False"):
        frost.reference.attention_forward(q, k, v, causal="False")


@pytest.mark.parametrize("rows", [1.5, "2", True])
def test_the_reference_names_a_bad_block_rows(rows):
    q, k, v = _qkv()
    with pytest.raises(TensorError, match=r"^block_rows: got "):
        frost.reference.attention_forward(q, k, v, block_rows=rows)


def _op_forward(q, cu_q, cu_kv, max_q, max_kv):
    """torch.ops.frost.attention_forward, called directly."""
    return attention_forward_op(q, q, q, cu_q, cu_kv, max_q, max_kv, None, None, None, None, False, None, None,
                                "top_left", None)


def test_a_direct_op_call_with_kv_offsets_alone_is_refused():
    """It ran dense, ignoring the offsets it was given."""
    q = torch.randn(S, H, D)
    with pytest.raises(ArgumentTypeError, match=r"^cu_seqlens_q: got None; accepted: a tensor when cu_seqlens_kv"):
        _op_forward(q, None, torch.tensor([0, S], dtype=torch.int32), S, S)


def test_a_direct_dense_op_call_refuses_a_negative_max_seqlen():
    q = torch.randn(B, S, H, D)
    with pytest.raises(TensorError, match=r"^max_seqlen_q: got -5"):
        _op_forward(q, None, None, -5, 0)
    assert _op_forward(q, None, None, 0, 0)[0].shape == q.shape


@pytest.mark.parametrize("strides", [5, "1,2", (1.0, 2, 3, 4)])
def test_the_builder_names_bad_strides(strides):
    with pytest.raises(GraphError, match=r"^tensor 'q'.strides: got "):
        GraphBuilder().tensor("q", (1, 2, 3, 4), "float32", strides=strides)


def test_a_plans_value_errors_name_the_graphs_tensors():
    """An engine checks offsets under the op's port name (cu_seqlens_q); the caller passed the graph tensor 'cu'."""
    b = GraphBuilder()
    cu = b.tensor("cu", (3,), "int32")
    ragged = {"offsets": cu, "max_len": 4}
    q, k, v = (b.tensor(n, (H, S, D), "float64", layout="bshd", ragged=ragged) for n in ("q", "k", "v"))
    b.sdpa_forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_kv=cu)
    plan = frost.compile(b.build(), target="cpu")
    t = torch.randn(S, H, D, dtype=torch.float64).transpose(0, 1)
    with pytest.raises(TensorError, match=r"^cu\[2\]: got 3; accepted: >= cu\[1\] = 5 "):
        plan.execute({"cu": torch.tensor([0, 5, 3], dtype=torch.int32), "q": t, "k": t, "v": t})


def test_a_long_value_is_cut_in_the_message():
    error = TensorError("seq_len_q", list(range(1000)), "lengths in [0, 8]")
    message = str(error)
    assert message.startswith("seq_len_q: got [0, 1, 2,") and "... (4890 characters); accepted: lengths" in message
    assert error.value == list(range(1000))   # the whole value stays on the error
