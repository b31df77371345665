"""Every mask or setting frost cannot express raises a typed error naming it; nothing runs with a different mask."""

import pytest

from frost.integrations import TRANSFORMERS_MIN

pytest.importorskip("transformers", minversion=TRANSFORMERS_MIN)

import torch  # noqa: E402

import frost  # noqa: E402
from frost.integrations.transformers import (UnsupportedAttentionMask, UnsupportedAttentionSetting,  # noqa: E402
                                             frost_attention_forward, frost_mask, register)
from hf_tiny_models import batch, gpt_oss, llama  # noqa: E402


def _frost_model(make=llama, **kwargs):
    register()
    model = make(**kwargs)
    model.set_attn_implementation("frost")
    return model


def _qkv(sq=8, skv=8):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(1, 4, sq, 16, generator=g), torch.randn(1, 2, skv, 16, generator=g),
            torch.randn(1, 2, skv, 16, generator=g))


def test_left_padded_mask():
    inputs = batch(batch_size=3, seq_len=10)
    inputs["attention_mask"] = torch.ones(3, 10, dtype=torch.long)
    inputs["attention_mask"][1, :3] = 0
    inputs["attention_mask"][2, 7:] = 0   # a right-padded row in the same batch
    with pytest.raises(UnsupportedAttentionMask, match=r"attention_mask\[1\]: got '0001111111'.*left padding"):
        _frost_model()(**inputs)


def test_mask_with_holes():
    inputs = batch(batch_size=2, seq_len=10)
    inputs["attention_mask"] = torch.ones(2, 10, dtype=torch.long)
    inputs["attention_mask"][0, 4] = 0
    with pytest.raises(UnsupportedAttentionMask, match=r"attention_mask\[0\].*holes"):
        _frost_model()(**inputs)


def test_prebuilt_4d_mask():
    inputs = batch(batch_size=1, seq_len=10)
    inputs["attention_mask"] = torch.ones(1, 1, 10, 10, dtype=torch.bool).tril()
    with pytest.raises(UnsupportedAttentionMask, match=r"attention_mask: got 'a 4-D bool tensor"):
        _frost_model()(**inputs)


def test_attention_dropout_in_training():
    model = _frost_model(gpt_oss, attention_dropout=0.1).train()
    with pytest.raises(UnsupportedAttentionSetting, match="dropout: got 0.1"):
        model(**batch(batch_size=1, seq_len=10))


@pytest.mark.parametrize("name", ["softcap", "position_bias", "head_mask"])
def test_kwargs_that_change_the_math(name):
    q, k, v = _qkv()
    with pytest.raises(UnsupportedAttentionSetting, match=f"{name}: got"):
        frost_attention_forward(torch.nn.Module(), q, k, v, None, **{name: torch.ones(1)})


def test_sinks_of_the_wrong_shape():
    q, k, v = _qkv()
    with pytest.raises(UnsupportedAttentionSetting, match=r"s_aux.shape: got \(2,\)"):
        frost_attention_forward(torch.nn.Module(), q, k, v, None, s_aux=torch.zeros(2))


def test_mask_and_sliding_window_disagree():
    q, k, v = _qkv()
    mask = frost_mask(batch_size=1, q_length=8, kv_length=8)   # causal, no window
    with pytest.raises(UnsupportedAttentionMask, match=r"band \(3, 0\) of sliding_window=4"):
        frost_attention_forward(torch.nn.Module(), q, k, v, mask, sliding_window=4)


def test_mask_built_for_other_lengths():
    q, k, v = _qkv()
    mask = frost_mask(batch_size=1, q_length=8, kv_length=12)
    with pytest.raises(UnsupportedAttentionMask, match=r"\(Sq, Skv\) = \(8, 12\)"):
        frost_attention_forward(torch.nn.Module(), q, k, v, mask)


def test_static_cache_diagonal():
    """A query at position 3 of a 16-slot cache: its diagonal is neither top-left (0) nor bottom-right (15)."""
    with pytest.raises(UnsupportedAttentionMask, match=r"q_offset - kv_offset: got 3"):
        frost_mask(batch_size=1, q_length=1, kv_length=16, q_offset=3)


def test_typed_errors_are_frost_errors():
    assert issubclass(UnsupportedAttentionMask, frost.FrostError)
    assert issubclass(UnsupportedAttentionSetting, frost.FrostError)
