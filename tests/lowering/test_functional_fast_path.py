"""frost.sdpa_backward on a kernel engine (a fake one, on CPU): a call whose key hits hands the launch the BSHD
tensors themselves (``seq_major``, no transposed views) and skips plan.execute's per-tensor checks, which the key
already holds -- except the pointers' 16-byte alignment, which it does not hold; one device per call is checked
when the key's plan is built."""

from __future__ import annotations

import pytest
import torch

import frost.api.functional as functional
from frost.errors import TensorError
from helpers.tensors import randn_bshd


def _qkv():
    """bf16 (B, S, H, D) q, k, v: B = 2, S = 24, Hq = 4, Hkv = 2, D = 64."""
    return tuple(randn_bshd(2, 24, h, 64, torch.bfloat16) for h in (4, 2, 2))


def _call(q, k, v, **kw):
    out, dout = torch.randn_like(q), torch.randn_like(q)
    lse = torch.randn(q.shape[0], q.shape[2], q.shape[1])
    return functional.sdpa_backward(q, k, v, out, dout, lse, causal=True, **kw), (out, dout, lse)


def test_a_hit_launches_the_bshd_tensors_without_views(kernel_engine):
    q, k, v = _qkv()
    for _ in range(2):
        (dq, dk, dv, dsink), (out, dout, lse) = _call(q, k, v)
        call, options = kernel_engine.kernels[0].launches[-1]
        assert options["seq_major"] is True and dsink is None
        # the caller's tensors and the fresh outputs themselves, in the launch's order
        assert all(a is b for a, b in zip(call[:9], (q, k, v, out, dout, lse, dq, dk, dv)))
        assert dq.shape == q.shape and dk.stride() == k.stride()
        assert set(call.workspace) >= {"dq_accum", "lse_log2", "delta", "dq_sem", "dsink_part"}
    assert len(kernel_engine.kernels) == 1 and len(kernel_engine.kernels[0].launches) == 2


def test_misaligned_pointers_are_refused_on_a_hit(kernel_engine):
    """An offset view has the same dtype, shape and strides (the same key) as the aligned tensor that built the
    plan: the trusted path still checks the alignment the kernels' vector loads need."""
    q, k, v = _qkv()
    _call(q, k, v)
    flat = torch.empty(q.numel() + 1, dtype=q.dtype)
    shifted = flat[1:].view(q.shape)                      # 2 bytes past a 16-byte boundary
    assert shifted.stride() == q.stride() and shifted.data_ptr() % 16
    with pytest.raises(TensorError, match=r"'q'.*data_ptr.*16-byte"):
        _call(shifted, k, v)
    assert len(kernel_engine.kernels[0].launches) == 1


def test_one_device_per_call(kernel_engine):
    q, k, v = _qkv()
    with pytest.raises(TensorError, match=r"v\.device.*meta.*cpu"):
        _call(q, k, v.to("meta"))
    assert not kernel_engine.kernels or not kernel_engine.kernels[0].launches


def test_reference_engine_plans_still_take_the_checked_path(monkeypatch):
    """No kernel engine (a CPU target): the plan has no seq-major run, so the call goes through plan.execute."""
    from frost.lowering.plan import Plan

    executed = []
    real = Plan.execute
    monkeypatch.setattr(Plan, "execute", lambda self, *a, **kw: executed.append(self) or real(self, *a, **kw))
    q, k, v = (torch.randn(1, 8, 2, 16, dtype=torch.float64) for _ in range(3))
    (dq, dk, dv, _), _ = _call(q, k, v)
    (plan,) = executed
    assert plan.engine == "reference" and plan.run_trusted_seq_major is None
    assert dq.shape == q.shape and torch.isfinite(dq).all()


@pytest.fixture
def torch_determinism():
    """Restores torch's determinism flag after the test."""
    before = torch.are_deterministic_algorithms_enabled()
    yield
    torch.use_deterministic_algorithms(before)


@pytest.mark.parametrize("flag, asked, expected", [(False, None, False), (True, None, True), (True, False, False),
                                                   (False, True, True)])
def test_deterministic_follows_torch_unless_given(kernel_engine, torch_determinism, flag, asked, expected):
    """deterministic=None follows torch.use_deterministic_algorithms; an explicit bool wins. Checked on what the
    kernel set was bound with, through the functional call and through frost.attention's backward."""
    import frost

    torch.use_deterministic_algorithms(flag)
    q, k, v = _qkv()
    _call(q, k, v, deterministic=asked)
    (kernel,) = kernel_engine.kernels
    assert [p.deterministic for p in kernel.problems] == [expected]
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = frost.attention(*leaves, causal=True, deterministic=asked)
    out.float().sum().backward()
    # the backward ran on the kernel set too; had it resolved the flag otherwise, its key would differ and it
    # would have bound a second problem
    assert len(kernel.launches) == 2 and [p.deterministic for p in kernel.problems] == [expected]


def test_deterministic_must_be_a_bool_or_none(kernel_engine):
    import frost

    q, k, v = _qkv()
    with pytest.raises(TensorError, match="deterministic"):
        _call(q, k, v, deterministic="yes")
    with pytest.raises(TensorError, match="deterministic"):
        frost.attention(q, k, v, deterministic=1)
