"""frost.attention_varlen on CUDA (the cute_sm120 packed kernels behind the public API) against the fp64 oracle
run one sequence at a time, under the FA rule: the error of the CUDA bf16 result is at most twice the error of the
same computation by the reference engine in bf16, plus 1e-3 of the largest value (helpers/fa_rule.py, no noise
term).

Run on the GPU machine: python3 -m pytest -m gpu tests/api/test_varlen_api_gpu.py"""

from __future__ import annotations

import pytest
import torch

import frost
from helpers.fa_rule import fa_rule
from helpers.oracle_api import attention, masked_lse_loss
from varlen_cases import Case, dense_expected, make

pytestmark = pytest.mark.gpu

CASES = {
    "gqa causal sink": Case((300, 0, 77, 1, 129), (300, 0, 77, 1, 129), hq=8, hkv=2, dqk=64, dv=64, sink=True,
                            options=dict(causal=True)),
    "window bottom-right seqused": Case((200, 64, 5), (250, 64, 0), used_q=(150, 64, 5), used_kv=(250, 10, 0),
                                        hq=4, hkv=4, dqk=128, dv=128, extra_q=7, extra_kv=3,
                                        options=dict(causal=True, window_size=(32, None),
                                                     causal_alignment="bottom_right")),
    "mqa deterministic": Case((129, 257, 1), (129, 257, 1), hq=4, hkv=1, dqk=64, dv=64, sink=True,
                              options=dict(causal=True, deterministic=True)),
}


def _run(case: Case, p, device, dtype):
    """out, lse, dq, dk, dv, dsink of loss = sum(out * dout) + sum(lse * dlse) through frost.attention_varlen."""
    leaves = [getattr(p, n).to(device, dtype).requires_grad_() for n in ("q", "k", "v")]
    sink = None if p.sink is None else p.sink.to(device).requires_grad_()
    opts = dict(case.options)
    on = {n: None if t is None else t.to(device) for n, t in (("seqused_q", p.seqused_q), ("seqused_kv", p.seqused_kv))}
    out, lse = frost.attention_varlen(*leaves, p.cu_q.to(device), p.cu_kv.to(device), p.max_q, p.max_kv, sink=sink,
                                      return_lse=True, **on, **opts)
    loss = (out.double() * p.dout.to(device)).sum() + masked_lse_loss(lse, p.dlse.to(device))
    grads = torch.autograd.grad(loss, [*leaves, *([sink] if sink is not None else [])], allow_unused=True,
                                materialize_grads=True)
    return dict(out=out, lse=lse, dq=grads[0], dk=grads[1], dv=grads[2], dsink=grads[3] if sink is not None else None)


@pytest.mark.parametrize("name", CASES)
def test_attention_varlen_on_cuda_meets_the_fa_rule(name):
    case = CASES[name]
    p = make(case, seed=3)
    p.q, p.k, p.v, p.dout = (t.to(torch.bfloat16).double() for t in (p.q, p.k, p.v, p.dout))   # exact bf16 inputs
    want = dense_expected(case, p, attention)
    lowp = _run(case, p, "cpu", torch.bfloat16)
    got = _run(case, p, "cuda", torch.bfloat16)
    failed, report = [], []
    for key, ref in want.items():
        if ref is not None:
            fa_rule(key, got[key], ref, lowp[key], failed, report, noise_scale=0.0)
    assert not failed, (failed, report)
