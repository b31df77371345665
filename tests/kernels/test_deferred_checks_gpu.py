"""On a GPU, bad lengths are found without a sync: the call that passes them launches (the kernels clamp), and a
later call raises a TensorError naming the argument and the bad index; FROST_CHECK_SEQ_LENS=sync raises before the
launch. Dense padding lengths and packed offsets alike."""

from __future__ import annotations

import pytest
import torch

import frost
from frost.errors import TensorError
from frost.lowering.engines.deferred_checks import CHECKS

pytestmark = pytest.mark.gpu
B, S, HQ, HKV, D = 2, 64, 4, 2, 64


def _qkv():
    g = torch.Generator(device="cuda").manual_seed(0)
    return [torch.randn(B, S, h, D, device="cuda", dtype=torch.bfloat16, generator=g) for h in (HQ, HKV, HKV)]


def _drain():
    torch.cuda.synchronize()
    CHECKS.landed(wait=True)


def test_a_bad_padding_length_is_raised_by_a_later_call(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    _drain()
    q, k, v = _qkv()
    bad = torch.tensor([S, S + 5], dtype=torch.int32, device="cuda")
    out = frost.attention(q, k, v, causal=True, seq_len_q=bad, seq_len_kv=bad)   # launches: the kernels clamp
    assert torch.isfinite(out.float()).all()
    torch.cuda.synchronize()
    good = torch.tensor([S, 7], dtype=torch.int32, device="cuda")
    with pytest.raises(TensorError, match=r"^seq_len_q: got \[64, 69\]; accepted: lengths in \[0, 64\] \(found in a "
                                          r"call made before this one"):
        frost.attention(q, k, v, causal=True, seq_len_q=good, seq_len_kv=good)
    _drain()


def test_sync_mode_raises_before_the_launch(monkeypatch):
    monkeypatch.setenv("FROST_CHECK_SEQ_LENS", "sync")
    q, k, v = _qkv()
    bad = torch.tensor([S, -1], dtype=torch.int32, device="cuda")
    with pytest.raises(TensorError, match=r"^seq_len_q: got \[64, -1\]"):
        frost.attention(q, k, v, seq_len_q=bad, seq_len_kv=bad)


def test_bad_packed_offsets_are_raised_by_a_later_call(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    _drain()
    t = 96
    q, k, v = (torch.randn(t, h, D, device="cuda", dtype=torch.bfloat16) for h in (HQ, HKV, HKV))
    cu = torch.tensor([0, 40, 30, 96], dtype=torch.int32, device="cuda")     # offsets that decrease
    frost.attention_varlen(q, k, v, cu, cu, 64, 64, causal=True)
    torch.cuda.synchronize()
    with pytest.raises(TensorError, match=r"^cu_seqlens_q\[2\]: got 30; accepted: >= cu_seqlens_q\[1\] = 40"):
        CHECKS.landed()
    _drain()


def test_a_lengths_tensor_shared_by_many_calls_is_copied_once(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    _drain()
    q, k, v = _qkv()
    lengths = torch.tensor([S, 9], dtype=torch.int32, device="cuda")
    copies = []
    original = CHECKS.submit.__func__

    def counting(self, tensors, limits, check):
        before = len(self._pending)
        original(self, tensors, limits, check)
        copies.append(len(self._pending) > before)

    monkeypatch.setattr(type(CHECKS), "submit", counting)
    for _ in range(8):
        frost.attention(q, k, v, causal=True, seq_len_q=lengths, seq_len_kv=lengths)
    assert sum(copies) == 1
    _drain()
