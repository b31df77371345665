"""The kernels' check of a call's optional tensors (frost.kernels.host_checks.check_optional_tensors): dtypes and
shapes read from frost.spec, each bad tensor named by its role, a gradient output given exactly with its input."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from frost.errors import TensorError
from frost.kernels.host_checks import check_optional_tensors

CPU = torch.device("cpu")
DENSE = {"B": 2, "Hq": 4, "Sq": 5}
PACKED = {"B": 3, "Hq": 4, "Tq": 9}


def _lengths(n=2):
    return torch.zeros(n, dtype=torch.int32)


def _sink(n=4, dtype=torch.float32):
    return torch.zeros(n, dtype=dtype)


def _call(**optional) -> SimpleNamespace:
    """A call's tensors as the launchers hold them: the optional ones by role."""
    return SimpleNamespace(optional=optional)


def test_good_optional_tensors_pass_both_layouts():
    t = _call(seq_len_q=_lengths(), seq_len_kv=_lengths(), sink=_sink(), dsink=_sink(),
              dlse=torch.zeros(2, 5, 4).transpose(1, 2))        # (B, Hq, Sq), any memory order
    check_optional_tensors("backward", t, DENSE, False, CPU)
    t = _call(seq_len_q=_lengths(3), sink=_sink(), dsink=_sink(), dlse=torch.zeros(9, 4).t())
    check_optional_tensors("backward", t, PACKED, True, CPU)
    check_optional_tensors("forward", _call(sink=_sink(), seq_len_kv=_lengths()), DENSE, False, CPU)


@pytest.mark.parametrize("kind, tensors, dims, packed, subject", [
    ("forward", dict(sink=_sink(dtype=torch.float16)), DENSE, False, "sink.dtype"),
    ("forward", dict(sink=_sink(3)), DENSE, False, "sink.shape"),
    ("forward", dict(seq_len_q=_lengths(3)), DENSE, False, "seq_len_q.shape"),
    ("forward", dict(seq_len_kv=_lengths().long()), DENSE, False, "seq_len_kv.dtype"),
    ("forward", dict(seq_len_q=_lengths(2)), PACKED, True, "seq_len_q.shape"),
    ("forward", dict(sink=torch.zeros(8)[::2]), DENSE, False, "sink.stride"),
    ("backward", dict(sink=_sink()), DENSE, False, "dsink"),
    ("backward", dict(dsink=_sink()), DENSE, False, "dsink"),
    ("backward", dict(dlse=torch.zeros(2, 4, 6)), DENSE, False, "dlse.shape"),
    ("backward", dict(dlse=torch.zeros(2, 4, 5)), PACKED, True, "dlse.shape"),
])
def test_a_bad_optional_tensor_is_named(kind, tensors, dims, packed, subject):
    with pytest.raises(TensorError) as info:
        check_optional_tensors(kind, _call(**tensors), dims, packed, CPU)
    assert info.value.subject == subject


def test_a_forward_ignores_what_only_a_backward_reads():
    check_optional_tensors("forward", _call(dlse="not looked at", dsink="not looked at"), DENSE, False, CPU)
