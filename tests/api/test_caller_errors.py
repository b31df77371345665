"""Bad input to the functional API (frost.sdpa_backward, frost.attention) is refused when the call is made, by a
FrostError that names the parameter as the caller spelled it, gives shapes in the caller's (B, S, H, D) layout and
says what is accepted. The attention forward checks what its backward will need."""

from __future__ import annotations

import pytest
import torch

import frost
from frost.errors import FrostError, NotSupported, TensorError
from helpers.tensors import randn_bshd as _bshd

B, S, HQ, HKV, D = 2, 16, 4, 2, 16


def _qkv():
    return _bshd(B, S, HQ, D), _bshd(B, S, HKV, D), _bshd(B, S, HKV, D)


def _backward_args():
    q, k, v = _qkv()
    out, lse = frost.attention(q, k, v, return_lse=True)
    return q, k, v, out, torch.randn_like(out), lse


def test_attention_refuses_tensors_on_another_device():
    q, k, v = _qkv()
    with pytest.raises(TensorError, match=r"^k\.device: got 'meta'; accepted: cpu"):
        frost.attention(q, k.to("meta"), v)


@pytest.mark.parametrize("kwargs, match", [
    ({"sink": torch.zeros(HQ, dtype=torch.float64)}, r"^sink\.dtype: got torch\.float64; accepted: torch\.float32$"),
    ({"sink": torch.zeros(HKV)}, r"^sink\.shape: got \(2,\); accepted: \(4,\)"),
    ({"seq_len_q": torch.full((B,), S, dtype=torch.int64)},
     r"^seq_len_q\.dtype: got torch\.int64; accepted: torch\.int32"),
    ({"seq_len_kv": torch.full((B + 1,), S, dtype=torch.int32)}, r"^seq_len_kv\.shape: got \(3,\); accepted: \(2,\)"),
    ({"causal_alignment": "bottom-right"}, r"^causal_alignment: got 'bottom-right'; accepted: 'top_left' or"),
    ({"softmax_scale": 0.0}, r"^softmax_scale: got 0\.0; accepted: None"),
    # finite in Python, inf in fp32: every output would be NaN
    ({"softmax_scale": 1e39}, r"^softmax_scale: got 1e\+39; accepted: None \(1/sqrt\(head dim of q\)\) or a float > 0 "
                              r"that fp32 holds \(at most 3\.4e38"),
    ({"causal": "yes"}, r"^causal: got 'yes'; accepted: True or False"),
    ({"window_size": (1.5, None)}, r"^window_size: got \(1\.5, None\)"),
])
def test_attention_forward_checks_what_the_backward_needs(kwargs, match):
    q, k, v = _qkv()
    with pytest.raises(TensorError, match=match):
        frost.attention(q, k, v, **kwargs)


@pytest.mark.parametrize("make, match", [
    # a rule, not another tensor, fixes Hkv: the accepted shape names it
    (lambda: (_bshd(B, S, HQ, D), _bshd(B, S, 3, D), _bshd(B, S, 3, D)),
     r"^k\.shape: got \(2, 16, 3, 16\); accepted: \(2, 16, Hkv, 16\) = \(B, Skv, Hkv, Dqk\): Hkv a divisor of Hq = 4"),
    (lambda: (_bshd(B, S, HQ, D), _bshd(3, S, HKV, D), _bshd(3, S, HKV, D)), r"^k\.shape: got \(3, 16, 2, 16\)"),
    (lambda: (_bshd(B, S, HQ, D), *(t.double() for t in _qkv()[1:])), r"^k\.dtype: got torch\.float64"),
    (lambda: (_bshd(B, S, HQ, D), _bshd(B, S, HKV, D), _bshd(B, S + 1, HKV, D)), r"^v\.shape: got \(2, 17, 2, 16\)"),
])
def test_attention_forward_checks_shapes_and_dtypes_in_bshd(make, match):
    with pytest.raises(TensorError, match=match):
        frost.attention(*make())


def test_sdpa_backward_names_dout_and_its_bshd_shape():
    q, k, v, out, dout, lse = _backward_args()
    wrong = dout.transpose(1, 2).contiguous()       # (B, H, S, D) memory passed as if it were BSHD
    with pytest.raises(TensorError) as info:
        frost.sdpa_backward(q, k, v, out, wrong, lse)
    assert str(info.value).startswith(f"dout.shape: got {tuple(wrong.shape)}; accepted: {tuple(out.shape)}")


@pytest.mark.parametrize("kwargs, subject", [
    ({"softmax_scale": 0}, "softmax_scale"), ({"softmax_scale": float("nan")}, "softmax_scale"),
    ({"softmax_scale": "x"}, "softmax_scale"), ({"causal_alignment": "bottom-right"}, "causal_alignment"),
    ({"window_size": ("a", 1)}, "window_size"), ({"causal": "yes"}, "causal"),
])
def test_sdpa_backward_names_options_as_spelled(kwargs, subject):
    with pytest.raises(TensorError) as info:
        frost.sdpa_backward(*_backward_args(), **kwargs)
    assert str(info.value).startswith(f"{subject}: got ")


def test_dtype_errors_carry_no_shape_suffix_and_name_out():
    q, k, v, out, dout, lse = _backward_args()
    with pytest.raises(TensorError) as info:
        frost.sdpa_backward(q, k, v, out.double(), dout, lse)
    message = str(info.value)
    assert message.startswith("out.dtype: got torch.float64; accepted: torch.float32") and "(B, H" not in message


def test_a_broadcast_dout_is_named_with_its_caller_strides():
    q, k, v, out, dout, lse = _backward_args()
    broadcast = dout[:, :1].expand_as(dout)
    with pytest.raises(TensorError) as info:
        frost.sdpa_backward(q, k, v, out, broadcast, lse)
    assert str(info.value).startswith(f"dout.stride(): got {broadcast.stride()}; accepted: stride 0 only")


def test_causal_alignment_typo_is_the_same_error_class_from_both_apis():
    q, k, v, out, dout, lse = _backward_args()
    errors = []
    for call in (lambda: frost.attention(q, k, v, causal_alignment="bottom-right"),
                 lambda: frost.sdpa_backward(q, k, v, out, dout, lse, causal_alignment="bottom-right")):
        with pytest.raises(FrostError) as info:
            call()
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1]) and str(errors[0]) == str(errors[1])


def test_a_non_tensor_is_named_as_the_caller_spelled_it():
    q, k, v, out, dout, lse = _backward_args()
    with pytest.raises(TensorError, match=r"^dout: got 'list'; accepted: a torch\.Tensor"):
        frost.sdpa_backward(q, k, v, out, [1.0], lse)


def test_a_backward_no_engine_serves_is_refused_at_the_forward(monkeypatch):
    """With only the kernel engine to ask and a shape it declines (Dv > Dqk on sm_120), the forward refuses."""
    import frost.analyzer
    import frost.api.plans as functional

    monkeypatch.setitem(functional._targets, torch.device("cpu"), "sm_120")
    monkeypatch.setattr(frost.analyzer, "probe", _probe_kernels_only)
    q, k, _ = (t.bfloat16() for t in _qkv())
    with pytest.raises(NotSupported, match="no engine serves this attention's backward on sm_120"):
        frost.attention(q, k, _bshd(B, S, HKV, 2 * D).bfloat16())


def _probe_kernels_only(graph, target):
    from frost.analyzer.capability import CUTE_SM120
    from frost.analyzer.probe import probe

    return probe(graph, target, (CUTE_SM120,))


def test_overlapping_strides_are_named_in_bshd():
    q, k, v, out, dout, lse = _backward_args()
    overlapping = torch.randn(4096).as_strided(dout.shape, (512, 16, 8, 1))   # heads 8 apart, 16 wide
    with pytest.raises(TensorError) as info:
        frost.sdpa_backward(q, k, v, out, overlapping, lse)
    message = str(info.value)
    assert message.startswith("dout.stride(): got (512, 16, 8, 1)") and str(tuple(dout.shape)) in message


def test_an_internal_error_is_renamed_to_the_callers_parameters():
    from frost.errors import GraphError
    from frost.api.checks import in_caller_terms

    internal = GraphError("sdpa_backward 'attn'.attn_scale", -1.0, "a finite float > 0")
    renamed = in_caller_terms(internal)
    assert isinstance(renamed, TensorError) and renamed.__cause__ is internal
    assert str(renamed) == "sdpa_backward 'attn'.softmax_scale: got -1.0; accepted: a finite float > 0"
    assert in_caller_terms(TensorError("tensor 'do' (do of op 'attn').data_ptr", "0x2", "aligned")).subject == \
        "tensor 'dout' (dout of op 'attn').data_ptr"


def test_renaming_keeps_the_detail_and_the_error_class():
    """A renamed error still says what its detail said (a deferred length check says the values came from an
    earlier call), and an ArgumentTypeError stays one."""
    from frost.api.checks import in_caller_terms
    from frost.errors import ArgumentTypeError

    late = TensorError("seq_len_q", [64, 69], "lengths in [0, 64]", "found in a call made before this one")
    assert str(in_caller_terms(late)).endswith("(found in a call made before this one)")
    typed = in_caller_terms(ArgumentTypeError("tensor 'o'.dtype", "x", "a dtype"))
    assert isinstance(typed, ArgumentTypeError) and typed.subject == "tensor 'out'.dtype"
