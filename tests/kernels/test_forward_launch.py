"""The forward's launch on CPU (no GPU, nothing compiled): a BoundForward passes the compiled kernel (kernel.FwdKernel)
the values its jit host entry declares, in order -- pointers as ints, sizes, strides, the scale, the band, the flags,
the stream handle last -- for dense and packed calls alike, and launches nothing for an empty problem."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
import torch

from frost.errors import TensorError
from frost.kernels.forward.api import CompiledForward, choose_forward_config
from frost.kernels.forward.kernel import FwdKernel
from frost.kernels.forward.launch import ForwardTensors
from frost.kernels.geometry import LOG2_E
from frost.kernels.mask import FLAG_BOTTOM_RIGHT, FLAG_SEQ_KV, FLAG_SEQ_Q, NO_BOUND
from frost.kernels.packed import Packed
from frost.spec import Mask, kernel_flag
from helpers.tensors import randn_bhsd

PARAMS = list(inspect.signature(FwdKernel.__call__).parameters)[1:]   # drop self


def _bound(scale: float, mask: Mask = Mask(), varlen: bool = False):
    """(a BoundForward on a recording kernel, the calls it records by parameter name)."""
    calls = []

    def launch(*args):
        assert len(args) == len(PARAMS), (len(args), len(PARAMS))
        calls.append(dict(zip(PARAMS, args)))

    cfg = choose_forward_config("bfloat16", 64, 64, "sm_90a", varlen=varlen)
    return CompiledForward(cfg, kernel=SimpleNamespace(forward=launch)).bind(scale, mask), calls


def test_a_dense_launch_passes_the_kernel_its_declared_arguments():
    bound, calls = _bound(0.125, Mask.of(True, 40, alignment="bottom_right"))
    q, o = (randn_bhsd((2, 4, 100, 64), torch.bfloat16, layout="bshd") for _ in range(2))
    k, v = (randn_bhsd((2, 2, 140, 64), torch.bfloat16, layout="bshd") for _ in range(2))
    lse, seq_q, sink = torch.zeros(2, 4, 100), torch.tensor([100, 7], dtype=torch.int32), torch.zeros(4)
    bound(ForwardTensors(q, k, v, o, lse, {"seq_len_q": seq_q, "sink": sink}), 7)
    (a,) = calls
    assert (a["pQ"], a["pK"], a["pV"], a["pO"], a["pLSE"]) == tuple(t.data_ptr() for t in (q, k, v, o, lse))
    assert (a["pSeqQ"], a["pSink"]) == (seq_q.data_ptr(), sink.data_ptr())
    assert a["pSeqKV"] == a["pCuQ"] == a["pCuKV"] == lse.data_ptr()   # stand-ins, their flags off
    assert (a["batch"], a["heads"], a["heads_kv"], a["seqlen_q"], a["seqlen_kv"]) == (2, 4, 2, 100, 140)
    assert (a["head_dim"], a["head_dim_v"], a["tokens_q"], a["tokens_kv"]) == (64, 64, 0, 0)
    assert (a["q_sb"], a["q_sh"], a["q_ss"]) == q.stride()[:3] and (a["v_sb"], a["v_sh"], a["v_ss"]) == v.stride()[:3]
    assert (a["lse_sb"], a["lse_sh"], a["lse_ss"]) == lse.stride()
    assert a["scale_log2"] == pytest.approx(0.125 * LOG2_E) and (a["band_left"], a["band_right"]) == (40, 0)
    assert a["flags"] == FLAG_BOTTOM_RIGHT | FLAG_SEQ_Q | kernel_flag("sink") and a["stream"] == 7


def test_a_packed_launch_passes_the_segments():
    """(H, T, D) views of (T, H, D) memory: batch stride 0, the prefix sums' pointers, the plan's max_seqlens as
    the sizes and the token counts."""
    bound, calls = _bound(0.125, varlen=True)
    tq, tkv, hq, hkv = 300, 310, 4, 2
    q, o = (torch.zeros(tq, hq, 64, dtype=torch.bfloat16).transpose(0, 1) for _ in range(2))
    k, v = (torch.zeros(tkv, hkv, 64, dtype=torch.bfloat16).transpose(0, 1) for _ in range(2))
    lse, seqused = torch.zeros(tq, hq).t(), torch.tensor([5, 10], dtype=torch.int32)
    packed = Packed(torch.tensor([0, 100, 300], dtype=torch.int32), torch.tensor([0, 10, 310], dtype=torch.int32),
                    200, 300)
    bound(ForwardTensors(q, k, v, o, lse, {"seq_len_kv": seqused}, packed), 7)
    (a,) = calls
    assert (a["pCuQ"], a["pCuKV"], a["pSeqKV"]) == (packed.cu_seqlens_q.data_ptr(), packed.cu_seqlens_kv.data_ptr(),
                                                    seqused.data_ptr())
    assert (a["batch"], a["seqlen_q"], a["seqlen_kv"], a["tokens_q"], a["tokens_kv"]) == (2, 200, 300, tq, tkv)
    assert (a["q_sb"], a["q_sh"], a["q_ss"]) == (0, 64, hq * 64) and (a["k_sb"], a["k_sh"], a["k_ss"]) == (0, 64, 128)
    assert (a["lse_sb"], a["lse_sh"], a["lse_ss"]) == (0, 1, hq)
    assert a["flags"] == FLAG_SEQ_KV and (a["band_left"], a["band_right"]) == (NO_BOUND, NO_BOUND)


@pytest.mark.parametrize("varlen", [False, True])
def test_seq_major_tensors_launch_as_their_logical_views_do(varlen):
    """The engine passes the caller's (B, S, H, D) / packed (T, H, D) tensors with seq_major=True: the kernel must
    get exactly the arguments the transposed logical views give it (sizes and strides read in the other order)."""
    bound, calls = _bound(0.125, Mask.of(True), varlen=varlen)
    lead = () if varlen else (2,)
    q, o = (torch.zeros(*lead, 100, 4, 64, dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.zeros(*lead, 140, 2, 64, dtype=torch.bfloat16) for _ in range(2))
    lse = torch.zeros(4, 100) if varlen else torch.zeros(2, 4, 100)
    packed = Packed(torch.tensor([0, 60, 100], dtype=torch.int32), torch.tensor([0, 70, 140], dtype=torch.int32),
                    60, 70) if varlen else None
    a = len(lead)   # the token axis
    views = [t.transpose(a, a + 1) for t in (q, k, v, o)]
    bound(ForwardTensors(*views, lse, packed=packed), 7)
    bound(ForwardTensors(q, k, v, o, lse, packed=packed), 7, seq_major=True)
    logical, seq_major = calls
    assert seq_major == logical


def test_an_empty_problem_launches_nothing():
    bound, calls = _bound(1.0)
    q, o = (torch.zeros(2, 4, 0, 64, dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.zeros(2, 2, 16, 64, dtype=torch.bfloat16) for _ in range(2))
    bound(ForwardTensors(q, k, v, o, torch.zeros(2, 4, 0)), 7)
    assert not calls


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf"), float("nan"), True])
def test_bind_refuses_a_bad_scale(scale):
    with pytest.raises(TensorError, match="scale"):
        _bound(scale)
