"""A packed batch frost cannot serve exactly raises a typed error naming the argument; documents never attend to
each other instead."""

import pytest

from frost.integrations import TRANSFORMERS_MIN

pytest.importorskip("transformers", minversion=TRANSFORMERS_MIN)

import torch  # noqa: E402
from transformers.masking_utils import (and_masks, causal_mask_function, packed_sequence_mask_function,  # noqa: E402
                                        remap_positions_for_packed_sequence)

from frost.integrations.transformers import (UnsupportedAttentionMask, UnsupportedAttentionSetting,  # noqa: E402
                                             frost_attention_forward, frost_mask, register)
from hf_packed import documents, flattened  # noqa: E402
from hf_tiny_models import gpt_oss, llama  # noqa: E402


def _model(make=gpt_oss):
    register()
    model = make()
    model.set_attn_implementation("frost")
    return model


def _collated(lengths=(5, 1, 9)) -> dict:
    inputs, _ = flattened(documents(list(lengths)), "collator")
    return inputs


def _qkv(tokens=15):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(1, 4, tokens, 16, generator=g), torch.randn(1, 2, tokens, 16, generator=g),
            torch.randn(1, 2, tokens, 16, generator=g))


def _attend(**kwargs):
    return frost_attention_forward(torch.nn.Module(), *_qkv(), None, **kwargs)


def test_flash_kwargs_in_part():
    flash = _collated()
    with pytest.raises(UnsupportedAttentionSetting, match="max_length_q: got None; accepted: given with "
                                                          "cu_seq_lens_q, cu_seq_lens_k"):
        _attend(cu_seq_lens_q=flash["cu_seq_lens_q"], cu_seq_lens_k=flash["cu_seq_lens_k"])


def test_flash_kwargs_with_padding():
    """transformers' own implementations read the padding and drop the documents: frost declines both."""
    inputs = _collated()
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    inputs["attention_mask"][0, -3:] = 0
    with pytest.raises(UnsupportedAttentionMask, match="attention_mask: got 'a padding mask with zeros"):
        _model()(**inputs, use_cache=False)


def test_position_ids_that_disagree_with_the_kwargs():
    inputs = _collated()
    inputs["position_ids"] = torch.cat([torch.arange(6), torch.arange(9)])[None]   # documents of 6 and 9 tokens
    with pytest.raises(UnsupportedAttentionMask, match=r"position_ids: got 'documents starting at tokens \[0, 6\]'"
                                                       r".*cu_seq_lens_q says: \[0, 5, 6\]"):
        _model()(**inputs, use_cache=False)


@pytest.mark.parametrize("names, value, match", [
    (("cu_seq_lens_k",), torch.tensor([0, 6, 15], dtype=torch.int32), r"cu_seq_lens_k: got 'offsets \[0, 6, 15\]'"),
    (("cu_seq_lens_q", "cu_seq_lens_k"), torch.tensor([0, 5, 12], dtype=torch.int32),
     r"cu_seq_lens_q: got 'offsets \[0, 5, 12\]'; accepted: offsets from 0 to 15, every token"),
    (("max_length_q", "max_length_k"), 4, r"max_length_q: got 4; accepted: >= the longest document, 9"),
    (("max_length_k",), 10, r"max_length_k: got 10; accepted: max_length_q = 9"),
    (("cu_seq_lens_q",), torch.tensor([0.0, 15.0]), r"cu_seq_lens_q: got 'a 1-D float32 tensor"),
])
def test_flash_kwargs_frost_cannot_serve(names, value, match):
    flash = {"cu_seq_lens_q": torch.tensor([0, 5, 6, 15], dtype=torch.int32), "max_length_q": 9, "max_length_k": 9}
    flash["cu_seq_lens_k"] = flash["cu_seq_lens_q"].clone()
    flash |= {name: value for name in names}
    with pytest.raises(UnsupportedAttentionSetting, match=match):
        _attend(**flash)


def test_documents_that_start_at_different_positions():
    """[0, 1, 2, 5, 6, 0, 1]: transformers' masks see three documents, its flash path two; frost neither."""
    inputs = {"input_ids": torch.arange(7)[None], "position_ids": torch.tensor([[0, 1, 2, 5, 6, 0, 1]])}
    with pytest.raises(UnsupportedAttentionMask, match=r"position_ids: got 'a document starting at position 5 "
                                                       r"\(row 0, token 3\)"):
        _model(llama)(**inputs, use_cache=False)


def test_packed_rows_with_right_padding():
    """transformers reads no documents when a padding mask is given, so they would attend to each other."""
    inputs = {"input_ids": torch.arange(20).view(2, 10), "position_ids": torch.tensor([[0, 1, 2, 3, 0, 1, 2, 0, 0, 0],
                                                                                      list(range(10))])}
    inputs["attention_mask"] = (torch.arange(10)[None] < torch.tensor([[7], [10]])).long()
    with pytest.raises(UnsupportedAttentionMask, match="position_ids: got 'positions that restart within the "
                                                       "valid tokens of a right-padded row'"):
        _model()(**inputs, use_cache=False)


def test_right_padded_rows_with_generate_style_positions_are_served():
    """Positions past a row's padding (generate fills them with 1) are not documents."""
    inputs = {"input_ids": torch.arange(20).view(2, 10), "position_ids": torch.tensor([[0, 1, 2, 3, 4, 5, 6, 1, 1, 1],
                                                                                      list(range(10))])}
    inputs["attention_mask"] = (torch.arange(10)[None] < torch.tensor([[7], [10]])).long()
    assert torch.isfinite(_model()(**inputs, use_cache=False).logits).all()


def test_packed_chunk_after_a_cache():
    model = _model(llama)
    first = model(input_ids=torch.arange(6)[None], use_cache=True)
    with pytest.raises(UnsupportedAttentionMask, match="position_ids: got 'positions that restart within a row, "
                                                       "with 6 cached keys'"):
        model(input_ids=torch.arange(6)[None], position_ids=torch.tensor([[0, 1, 2, 0, 1, 2]]),
              cache=first.past_key_values, use_cache=True)


def test_packed_mask_with_another_function_inside():
    pos = torch.tensor([[0, 1, 2, 0, 1, 2]])
    inner = and_masks(causal_mask_function, lambda b, h, q, kv: kv % 2 == 0)
    fn = and_masks(remap_positions_for_packed_sequence(inner, pos),
                   packed_sequence_mask_function(torch.tensor([[0, 0, 0, 1, 1, 1]])))
    with pytest.raises(UnsupportedAttentionMask, match="mask_function: got 'and_masks.<locals>.and_mask'.*within "
                                                       "each packed document"):
        frost_mask(batch_size=1, q_length=6, kv_length=6, mask_function=fn)


def test_position_ids_of_another_length():
    with pytest.raises(UnsupportedAttentionMask, match=r"position_ids.shape: got \(1, 5\)"):
        _attend(position_ids=torch.arange(5)[None])
