"""Host-side checks of the packed kernel calls (CPU): the segments' tensors and values, and the checked entries'
argument errors before anything is launched."""

from __future__ import annotations

import pytest
import torch

from frost.errors import TensorError
from frost.kernels.forward import choose_forward_config
from frost.kernels.forward.api import CompiledForward
from frost.kernels.packed import check_packed_side
from frost.kernels.packed import Packed, check_packed_values

CU = torch.tensor([0, 3, 3, 10], dtype=torch.int32)


def _packed(cu_q=CU, cu_kv=CU, max_q=7, max_kv=7):
    return Packed(cu_q, cu_kv, max_q, max_kv)


def test_good_segments_pass():
    check_packed_values(_packed(), 10, 12, torch.tensor([3, 0, 5], dtype=torch.int32), None)
    check_packed_side(_packed(), torch.device("cpu"), 10, 12)


@pytest.mark.parametrize("bad, subject", [
    (dict(cu_q=torch.tensor([1, 3, 3, 10], dtype=torch.int32)), r"cu_seqlens_q\[0\]"),
    (dict(cu_kv=torch.tensor([0, 5, 3, 10], dtype=torch.int32)), r"cu_seqlens_kv\[2\]"),
    (dict(max_q=6), r"max_seqlen_q"),
    (dict(cu_q=torch.tensor([0, 3, 3, 11], dtype=torch.int32)), r"cu_seqlens_q\[3\]"),
])
def test_bad_segment_values_are_named(bad, subject):
    with pytest.raises(TensorError, match=subject):
        check_packed_values(_packed(**bad), 10, 10)


def test_seqused_past_its_segment_is_named():
    with pytest.raises(TensorError, match=r"seqused_kv\[0\]"):
        check_packed_values(_packed(), 10, 10, None, torch.tensor([4, 0, 7], dtype=torch.int32))


@pytest.mark.parametrize("packed, subject", [
    (_packed(cu_q=CU.long()), "cu_seqlens_q.dtype"),
    (_packed(cu_kv=CU[:-1]), "cu_seqlens_kv.shape"),
    (_packed(max_q=True), "max_seqlen_q"),
    (_packed(max_kv=-1), "max_seqlen_kv"),
])
def test_bad_segment_tensors_are_named(packed, subject):
    with pytest.raises(TensorError) as info:
        check_packed_side(packed, torch.device("cpu"), 10, 10)
    assert info.value.subject == subject


def test_a_packed_forward_call_checks_its_tensors_first():
    """The varlen forward's checked entry refuses bad shapes before it looks for a GPU (the kernel is not
    compiled: the check comes first)."""
    cfg = choose_forward_config("bfloat16", 64, 64, "sm_120a", varlen=True)
    fwd = CompiledForward(cfg, kernel=object())
    q = torch.zeros(4, 10, 64, dtype=torch.bfloat16)
    kv = torch.zeros(2, 10, 64, dtype=torch.bfloat16)
    lse = torch.zeros(4, 10)
    with pytest.raises(TensorError, match="packed"):
        fwd(q, kv, kv, q.clone(), lse, scale=0.125)
    with pytest.raises(TensorError, match=r"lse"):
        fwd(q, kv, kv, q.clone(), lse[:, :9], scale=0.125, packed=_packed())
    with pytest.raises(TensorError, match=r"q.device"):
        fwd(q, kv, kv, q.clone(), lse, scale=0.125, packed=_packed())
