"""The adapter hands frost.attention exactly what transformers gave it: BSHD views of the same memory, the scale, the
window of sliding_window, the sinks as fp32 with their gradient reaching the parameter, and the padding lengths."""

import pytest

from frost.integrations import TRANSFORMERS_MIN

pytest.importorskip("transformers", minversion=TRANSFORMERS_MIN)

import torch  # noqa: E402

import frost  # noqa: E402
from frost.integrations.transformers import frost_attention_forward, frost_mask  # noqa: E402


@pytest.fixture
def captured(monkeypatch):
    """Records frost.attention's arguments while still running it."""
    calls = []
    real = frost.attention

    def spy(q, k, v, **kwargs):
        calls.append((q, k, v, kwargs))
        return real(q, k, v, **kwargs)

    monkeypatch.setattr(frost, "attention", spy)
    return calls


def _bhsd(b=2, h=4, s=10, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, s, d, generator=g, requires_grad=True)


def test_views_scale_window_and_sinks(captured):
    query, key, value = _bhsd(h=4), _bhsd(h=2, seed=1), _bhsd(h=2, seed=2)
    sinks = torch.nn.Parameter(torch.tensor([1.5, -2.0, 0.25, -0.5], dtype=torch.bfloat16))
    out, weights = frost_attention_forward(torch.nn.Module(), query, key, value, None, scaling=0.3,
                                           sliding_window=4, s_aux=sinks)
    q, k, v, kwargs = captured[0]
    for given, passed in ((query, q), (key, k), (value, v)):
        assert passed.data_ptr() == given.data_ptr() and passed.shape == given.transpose(1, 2).shape
        assert passed.stride() == given.transpose(1, 2).stride()
    assert kwargs["softmax_scale"] == 0.3 and kwargs["window_size"] == (3, 0) and kwargs["causal"]
    assert kwargs["sink"].dtype == torch.float32 and torch.equal(kwargs["sink"], sinks.float())
    assert weights is None and out.shape == (2, 10, 4, 16)
    out.sum().backward()
    assert sinks.grad is not None and sinks.grad.dtype == torch.bfloat16 and sinks.grad.abs().sum() > 0


def test_padding_lengths_reach_frost(captured):
    query, key, value = _bhsd(), _bhsd(seed=1), _bhsd(seed=2)
    padding = torch.arange(10)[None, :] < torch.tensor([10, 6])[:, None]
    mask = frost_mask(batch_size=2, q_length=10, kv_length=10, attention_mask=padding)
    frost_attention_forward(torch.nn.Module(), query, key, value, mask, scaling=None)
    kwargs = captured[0][3]
    assert kwargs["seq_len_kv"].tolist() == [10, 6] and kwargs["seq_len_kv"].dtype == torch.int32
    assert kwargs["causal_alignment"] == "top_left" and kwargs["window_size"] == (None, 0)
