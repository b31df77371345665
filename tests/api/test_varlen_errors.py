"""Every bad argument of the packed APIs is a TensorError that names the argument as the caller spelled it (with the
first bad index for a value), raised by the functional calls and, at the forward, by frost.attention_varlen."""

from __future__ import annotations

import pytest
import torch

import frost
from frost.errors import TensorError
from varlen_cases import Case, make

I32 = torch.int32


def _call(kind: str, p, **kw):
    """The forward, the backward (with a forward's outputs) or attention_varlen on a case's tensors, kw overriding
    any argument by its caller name."""
    args = dict(q=p.q, k=p.k, v=p.v, cu_seqlens_q=p.cu_q, cu_seqlens_kv=p.cu_kv, max_seqlen_q=p.max_q,
                max_seqlen_kv=p.max_kv, **p.extras())
    if kind == "backward":
        out, lse = frost.sdpa_forward_varlen(*p.args(), **p.extras())
        args |= dict(out=out, dout=p.dout, lse=lse)
    args |= kw
    if kind == "forward":
        return frost.sdpa_forward_varlen(**args)
    if kind == "attention":
        return frost.attention_varlen(**args)
    return frost.sdpa_backward_varlen(**args)


def _p():
    return make(Case(sink=True, used_q=(5, 0, 6, 1), used_kv=(6, 3, 7, 0)))   # Tq = 13, Tkv = 16, Hq = 4, Hkv = 2


# (caller keyword, a bad value built from the case, the subject the error must start with)
STATIC = [
    ("q", lambda p: [1.0], "q"),
    ("q", lambda p: p.q[None], r"q\.shape"),
    ("k", lambda p: p.k[..., :4], r"k\.shape"),
    ("k", lambda p: torch.cat([p.k, p.k[:, :1]], dim=1), r"k\.shape"),     # Hkv = 3 does not divide Hq = 4
    ("v", lambda p: p.v[:-1], r"v\.shape"),
    ("k", lambda p: p.k.float(), r"k\.dtype"),
    ("q", lambda p: p.q[:1].expand(p.q.shape[0], -1, -1), r"q\.stride\(\)"),
    ("cu_seqlens_q", lambda p: p.cu_q.long(), r"cu_seqlens_q\.dtype"),
    ("cu_seqlens_q", lambda p: p.cu_q[None], r"cu_seqlens_q\.shape"),
    ("cu_seqlens_kv", lambda p: p.cu_kv[:-1], r"cu_seqlens_kv\.shape"),
    ("cu_seqlens_kv", lambda p: p.cu_kv.to("meta"), r"cu_seqlens_kv\.device"),
    ("cu_seqlens_q", lambda p: p.cu_q.tolist(), "cu_seqlens_q"),
    ("cu_seqlens_kv", lambda p: None, "cu_seqlens_kv"),
    ("seqused_q", lambda p: torch.zeros(5, dtype=I32), r"seqused_q\.shape"),
    ("seqused_kv", lambda p: p.seqused_kv.long(), r"seqused_kv\.dtype"),
    ("sink", lambda p: torch.zeros(2), r"sink\.shape"),
    ("sink", lambda p: torch.zeros(4, dtype=torch.float64), r"sink\.dtype"),
    ("max_seqlen_q", lambda p: True, "max_seqlen_q"),
    ("max_seqlen_q", lambda p: 7.0, "max_seqlen_q"),
    ("max_seqlen_kv", lambda p: -1, "max_seqlen_kv"),
    ("max_seqlen_kv", lambda p: torch.tensor(7), "max_seqlen_kv"),
    ("softmax_scale", lambda p: 0.0, "softmax_scale"),
    ("causal", lambda p: "yes", "causal"),
    ("window_size", lambda p: 4, "window_size"),
    ("causal_alignment", lambda p: "bottom-right", "causal_alignment"),
]


@pytest.mark.parametrize("kind", ["forward", "backward", "attention"])
@pytest.mark.parametrize("keyword, bad, subject", STATIC, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(STATIC)])
def test_a_bad_argument_is_named(kind, keyword, bad, subject):
    p = _p()
    with pytest.raises(TensorError, match=rf"^{subject}:"):
        _call(kind, p, **{keyword: bad(p)})


BACKWARD_ONLY = [
    ("out", lambda p, o, l: o.float(), r"out\.dtype"),
    ("out", lambda p, o, l: o[:-1], r"out\.shape"),
    ("dout", lambda p, o, l: p.dout[:, :2], r"dout\.shape"),
    ("lse", lambda p, o, l: l.t().contiguous(), r"lse\.shape"),     # (Tq, Hq): the (Hq, Tq) view is l.t()
    ("lse", lambda p, o, l: l.double(), r"lse\.dtype"),
    ("dlse", lambda p, o, l: l[:, :-1], r"dlse\.shape"),
    ("dout", lambda p, o, l: [0.0], "dout"),
    ("lse", lambda p, o, l: None, "lse"),
    ("deterministic", lambda p, o, l: "yes", "deterministic"),
]


@pytest.mark.parametrize("keyword, bad, subject", BACKWARD_ONLY, ids=[k for k, _, _ in BACKWARD_ONLY])
def test_a_bad_backward_argument_is_named(keyword, bad, subject):
    p = _p()
    out, lse = frost.sdpa_forward_varlen(*p.args(), **p.extras())
    args = dict(out=out, dout=p.dout, lse=lse, dlse=torch.zeros_like(lse)) | {keyword: bad(p, out, lse)}
    with pytest.raises(TensorError, match=rf"^{subject}:"):
        frost.sdpa_backward_varlen(p.q, p.k, p.v, cu_seqlens_q=p.cu_q, cu_seqlens_kv=p.cu_kv, max_seqlen_q=p.max_q,
                                   max_seqlen_kv=p.max_kv, **p.extras(), **args)


# cu_seqlens (lens_q (5, 0, 7, 1) -> [0, 5, 5, 12, 13], Tq = 13; kv [0, 6, 9, 16, 16], Tkv = 16) and seqused values
VALUES = [
    (dict(cu_seqlens_q=torch.tensor([1, 5, 5, 12, 13], dtype=I32)), r"cu_seqlens_q\[0\]"),
    (dict(cu_seqlens_q=torch.tensor([0, 5, 4, 12, 13], dtype=I32)), r"cu_seqlens_q\[2\]"),
    (dict(cu_seqlens_kv=torch.tensor([0, 6, 9, 16, 17], dtype=I32)), r"cu_seqlens_kv\[4\]"),
    (dict(cu_seqlens_q=torch.tensor([0, 5, 5, 13, 13], dtype=I32)), r"cu_seqlens_q\[3\] - cu_seqlens_q\[2\]"),
    (dict(max_seqlen_kv=6), r"cu_seqlens_kv\[3\] - cu_seqlens_kv\[2\]"),
    (dict(seqused_q=torch.tensor([5, 1, 7, 1], dtype=I32)), r"seqused_q\[1\]"),
    (dict(seqused_kv=torch.tensor([6, 3, -1, 0], dtype=I32)), r"seqused_kv\[2\]"),
]


@pytest.mark.parametrize("kind", ["forward", "backward", "attention"])
@pytest.mark.parametrize("change, subject", VALUES, ids=[s for _, s in VALUES])
def test_a_bad_value_is_named_with_its_first_bad_index(kind, change, subject, monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    p = _p()
    with pytest.raises(TensorError, match=rf"^{subject}:"):
        _call(kind, p, **change)


def test_the_value_check_is_off_with_frost_check_seq_lens_0(monkeypatch):
    """A max_seqlen below a segment is caught by default; with the check off the call runs (the reference engine
    does not need max_seqlen, so the result is still right)."""
    p = _p()
    monkeypatch.setenv("FROST_CHECK_SEQ_LENS", "0")
    out, _ = _call("forward", p, max_seqlen_kv=6)
    torch.testing.assert_close(out, _call("forward", p)[0])
    monkeypatch.setenv("FROST_CHECK_SEQ_LENS", "1")
    with pytest.raises(TensorError, match=r"^cu_seqlens_kv\[3\] - cu_seqlens_kv\[2\]: got 7; accepted: <= "
                                          r"max_seqlen_kv = 6"):
        _call("forward", p, max_seqlen_kv=6)


def test_attention_varlen_refuses_at_the_forward_what_the_backward_would():
    p = _p()
    with pytest.raises(TensorError, match=r"^cu_seqlens_kv\.shape"):
        frost.attention_varlen(p.q.requires_grad_(), p.k, p.v, p.cu_q, p.cu_kv[:2], p.max_q, p.max_kv)


def test_check_cu_seqlens_reads_device_values_once_and_names_the_index():
    from frost.kernels.host_checks import check_cu_seqlens

    cu, used = torch.tensor([0, 3, 3, 7], dtype=I32), torch.tensor([3, 0, 2], dtype=I32)
    check_cu_seqlens("cu_seqlens_q", cu, 8, 4, used, "seqused_q")   # legal: nothing raised
    with pytest.raises(TensorError, match=r"^seqused_q\[2\]: got 5; accepted: a length in \[0, 4\]"):
        check_cu_seqlens("cu_seqlens_q", cu, 8, 4, torch.tensor([3, 0, 5], dtype=I32), "seqused_q")
    with pytest.raises(TensorError, match=r"^cu_seqlens_q\[3\]: got 7; accepted: <= 6"):
        check_cu_seqlens("cu_seqlens_q", cu, 6, 4)


def test_an_internal_error_is_renamed_to_the_callers_parameters():
    """An IR or engine error about the op's seq_len_q / o reaches the caller as seqused_q / out."""
    from frost.errors import GraphError
    from frost.api.checks import in_caller_terms

    inner = GraphError("tensor 'seq_len_q'.shape", (3,), "(B,)")
    renamed = in_caller_terms(inner, packed=True)
    assert isinstance(renamed, TensorError) and renamed.__cause__ is inner
    assert str(renamed).startswith("tensor 'seqused_q'.shape: got (3,)")
    assert in_caller_terms(GraphError("tensor 'o'.strides", (1,), "x"), packed=True).subject == "tensor 'out'.strides"


def test_the_value_check_is_skipped_while_a_cuda_graph_is_captured(monkeypatch):
    """A read back would break the capture: the packed check follows the padding check's switch."""
    from frost.lowering.engines.length_checks import check_seq_len_values as value_checks_enabled

    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    assert value_checks_enabled()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert not value_checks_enabled()
