"""Whole models through attn_implementation="frost" match eager attention: loss and every parameter's gradient."""

import pytest

from frost.integrations import TRANSFORMERS_MIN

pytest.importorskip("transformers", minversion=TRANSFORMERS_MIN)

import torch  # noqa: E402
from hf_tiny_models import assert_fa_rule, batch, gpt_oss, llama, loss_and_grads, mistral, qwen3  # noqa: E402


def test_gpt_oss_sinks_sliding_and_full_layers():
    assert_fa_rule(gpt_oss(), batch(seq_len=20))


def test_llama_gqa_causal():
    assert_fa_rule(llama(), batch(seq_len=20))


def test_mistral_sliding_window():
    assert_fa_rule(mistral(), batch(seq_len=20))


def test_qwen3_full_and_sliding_layers():
    assert_fa_rule(qwen3(), batch(seq_len=20))


def test_gpt_oss_right_padded_batch():
    assert_fa_rule(gpt_oss(), batch(batch_size=3, seq_len=20, lengths=[20, 13, 4]))


def test_right_padding_changes_the_loss():
    """The padded-batch test has teeth: with labels on padded positions, the mask changes eager's loss."""
    model, padded = gpt_oss(), batch(batch_size=2, seq_len=20, lengths=[20, 9])
    unmasked = {k: v for k, v in padded.items() if k != "attention_mask"}
    with_mask = loss_and_grads(model, "eager", torch.float64, padded)["loss"]
    without = loss_and_grads(model, "eager", torch.float64, unmasked)["loss"]
    assert (with_mask - without).abs().max().item() > 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("seq_len, lengths", [(1024, None), (2048, None), (4096, None), (4096, [4096, 3001])])
def test_gpt_oss_long_sequences_bf16_on_cuda(seq_len, lengths):
    """The tiny gpt-oss model at training lengths, its sliding layer at gpt-oss's 128-token window."""
    batch_size = 1 if lengths is None else len(lengths)
    assert_fa_rule(gpt_oss(sliding_window=128), batch(batch_size=batch_size, seq_len=seq_len, lengths=lengths),
                   device="cuda", dtypes=(torch.bfloat16,))
