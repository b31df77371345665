"""Padding-free batches through attn_implementation="frost": every document attends only to itself, with every
layer's own mask (causal, sliding window, sinks, GQA), whether the documents come as position_ids restarting
within a row or as DataCollatorWithFlattening's flash kwargs; and they are read once per mask, not per layer."""

import pytest

from frost.integrations import TRANSFORMERS_MIN

pytest.importorskip("transformers", minversion=TRANSFORMERS_MIN)

import torch  # noqa: E402
from transformers.masking_utils import (and_masks, packed_sequence_mask_function,  # noqa: E402
                                        remap_positions_for_packed_sequence, sliding_window_causal_mask_function)

import frost  # noqa: E402
import frost.integrations.transformers.attention as adapter_attention  # noqa: E402
import frost.integrations.transformers.packed as packed  # noqa: E402
from frost.integrations.transformers import frost_attention_forward, frost_mask  # noqa: E402
from hf_packed import FORMS, assert_packed_fa_rule, documents, flattened  # noqa: E402
from hf_tiny_models import gpt_oss, llama, mistral, model_copy, qwen3  # noqa: E402

LENGTHS = [1, 9, 1, 12, 5]   # one-token documents first and inside; windows 3 and 6 cut the longer ones


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("window", [3, 6, 16])
def test_gpt_oss_packed_matches_padded(form, window):
    """fp32 against the right-padded batch; bf16 against the packed rows with eager's block masks."""
    model, docs = gpt_oss(sliding_window=window), documents(LENGTHS)
    assert_packed_fa_rule(model, docs, form)
    assert_packed_fa_rule(model, docs, form, reference="masked", dtypes=(torch.bfloat16,))


@pytest.mark.parametrize("use_cache", [False, True])
@pytest.mark.parametrize("form", FORMS)
def test_llama_packed_matches_padded(form, use_cache):
    """Without a cache transformers' own mask is packed (frost reads it); with one it is not, and frost reads the
    documents from position_ids or the kwargs alone."""
    assert_packed_fa_rule(llama(), documents(LENGTHS), form, use_cache=use_cache)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("make", [mistral, qwen3])
def test_sliding_window_families_packed(make, form):
    """Against eager with block masks on the same rows (right padding longer than a window leaves padded queries of
    these sink-less models without a key, and eager's padded reference then turns NaN)."""
    assert_packed_fa_rule(make(), documents(LENGTHS), form, reference="masked",
                          dtypes=(torch.float32, torch.bfloat16))


def test_two_packed_rows():
    """position_ids restarting in each of two rows: every row's documents, none across the row boundary."""
    assert_packed_fa_rule(gpt_oss(), documents([9, 1, 5, 12, 3]), rows=2)


@pytest.mark.parametrize("reference", ["padded", "masked"])
def test_cross_document_attention_fails_the_rule(monkeypatch, reference):
    """The parity tests have teeth: frost run on the packed row as one sequence breaks the rule."""
    monkeypatch.setattr(adapter_attention, "call_documents", lambda *args, **kwargs: None)
    with pytest.raises(AssertionError, match="frost \\(packed\\) error > 2x eager"):
        assert_packed_fa_rule(gpt_oss(), documents(LENGTHS), reference=reference)


@pytest.mark.parametrize("form", FORMS)
def test_documents_are_read_once_per_mask(monkeypatch, form):
    """Four layers, two mask types: the documents are read twice per forward (once per FrostMask), and the
    backward reads nothing."""
    reads = []
    for name in ("position_documents", "kwargs_documents"):
        real = getattr(packed, name)
        monkeypatch.setattr(packed, name, lambda *a, _real=real, _name=name, **k: reads.append(_name) or _real(*a, **k))
    model = model_copy(gpt_oss(num_hidden_layers=4, layer_types=["sliding_attention", "full_attention"] * 2),
                       "frost", torch.float64)   # registers frost: the test holds run alone or in any order
    inputs, _ = flattened(documents(LENGTHS), form)
    loss = model(**inputs, use_cache=False).logits.sum()
    loss.backward()
    expected = {"position_documents": 2} | ({"kwargs_documents": 2} if form == "collator" else {})
    assert {n: reads.count(n) for n in set(reads)} == expected


def test_packed_mask_keeps_the_per_document_band():
    """transformers' packed wrapper around a sliding-window function: the band is the window's, and the
    position_ids come along for the attention function."""
    pos = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 0, 1]])
    docs = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 2, 2]])
    fn = and_masks(remap_positions_for_packed_sequence(sliding_window_causal_mask_function(4), pos),
                   packed_sequence_mask_function(docs))
    mask = frost_mask(batch_size=1, q_length=10, kv_length=10, mask_function=fn, local_size=4)
    assert mask.bands[0] == (3, 0) and mask.position_ids is pos and mask.seq_len_kv is None


def _bhsd(heads: int, tokens: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, heads, tokens, 16, generator=g, dtype=torch.float64, requires_grad=True)


def test_flash_kwargs_alone_run_each_document(monkeypatch):
    """cu_seq_lens_* with max_length_* and no position_ids: frost.attention_varlen gets int32 offsets on q's device
    and the host max, and each document equals frost.attention on that document alone (output and gradients)."""
    calls = []
    real = frost.attention_varlen
    monkeypatch.setattr(frost, "attention_varlen", lambda *a, **k: calls.append(a) or real(*a, **k))
    cu = [0, 5, 6, 15]
    query, key, value = _bhsd(4, 15, 0), _bhsd(2, 15, 1), _bhsd(2, 15, 2)
    sinks = torch.tensor([0.5, -1.0, 1.5, -0.25], dtype=torch.float64, requires_grad=True)
    flash = dict(cu_seq_lens_q=torch.tensor(cu, dtype=torch.int32), cu_seq_lens_k=torch.tensor(cu, dtype=torch.int32),
                 max_length_q=9, max_length_k=9)
    out, _ = frost_attention_forward(torch.nn.Module(), query, key, value, None, scaling=0.3, sliding_window=4,
                                     s_aux=sinks, **flash)
    grads = torch.autograd.grad(out.square().sum(), (query, key, value, sinks))
    cu_seqlens, max_seqlen = calls[0][3], calls[0][5]
    assert cu_seqlens.dtype == torch.int32 and cu_seqlens.tolist() == cu and max_seqlen == 9

    pieces = [frost.attention(*(t[:, :, a:b].transpose(1, 2) for t in (query, key, value)), softmax_scale=0.3,
                              causal=True, window_size=(3, 0), sink=sinks.float())
              for a, b in zip(cu, cu[1:])]
    want = torch.cat(pieces, dim=1)
    want_grads = torch.autograd.grad(want.square().sum(), (query, key, value, sinks))
    torch.testing.assert_close(out, want)   # fp64 both ways: only the summation order differs
    for got, expected in zip(grads, want_grads):
        torch.testing.assert_close(got, expected.to(got.dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("form", FORMS)
def test_gpt_oss_packed_bf16_on_cuda(form):
    """One row of 4,376 tokens (five documents, one of a single token), the sliding layer at gpt-oss's 128-token
    window, bf16 on frost's kernels, against eager with block masks on the same row."""
    docs = documents([1500, 1, 2047, 128, 700])
    assert_packed_fa_rule(gpt_oss(sliding_window=128), docs, form, reference="masked", device="cuda",
                          dtypes=(torch.bfloat16,))
