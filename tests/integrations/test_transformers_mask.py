"""frost's mask function describes exactly the mask transformers would build (checked densely against sdpa_mask),
and generation (a growing cache, bottom-right diagonals, sliding caches) matches eager token for token."""

import pytest

from frost.integrations import TRANSFORMERS_MIN

pytest.importorskip("transformers", minversion=TRANSFORMERS_MIN)

import torch  # noqa: E402
from transformers.masking_utils import (and_masks, causal_mask_function, sdpa_mask,  # noqa: E402
                                        sliding_window_causal_mask_function, sliding_window_overlay)

from frost.integrations.transformers import FrostMask, frost_mask, register  # noqa: E402
from frost.integrations.transformers.band import recognised_band  # noqa: E402
from hf_tiny_models import batch, gpt_oss, mistral  # noqa: E402


def _dense(mask: FrostMask, batch_size: int) -> torch.Tensor:
    """The (B, 1, Sq, Skv) bool mask a FrostMask stands for, by frost's rules (DESIGN.md: the math)."""
    sq, skv = mask.q_length, mask.kv_length
    i, j = torch.arange(sq)[:, None], torch.arange(skv)[None, :]
    lengths = mask.seq_len_kv if mask.seq_len_kv is not None else torch.full((batch_size,), skv)
    diag = 0 if mask.alignment == "top_left" else skv - sq
    left, right = mask.bands[0]
    keep = torch.ones(sq, skv, dtype=torch.bool)
    if left is not None:
        keep &= j - i - diag >= -left
    if right is not None:
        keep &= j - i - diag <= right
    return (keep[None] & (j[None] < lengths[:, None, None]))[:, None]


GRIDS = [  # (q_length, kv_length, q_offset, kv_offset): prefill, decode, chunked prefill, a sliding cache
    (12, 12, 0, 0), (1, 12, 11, 0), (4, 12, 8, 0), (1, 6, 20, 15), (3, 8, 17, 12),
]


def _mask_function(kind: str, window):
    """transformers' own function (read without evaluating it), or the same mask built another way (checked
    densely)."""
    if kind == "own":
        return causal_mask_function if window is None else sliding_window_causal_mask_function(window)
    if window is None:
        return lambda b, h, q, kv: kv <= q
    return and_masks(causal_mask_function, sliding_window_overlay(window))


def test_own_functions_are_recognised():
    assert recognised_band(causal_mask_function) == (None, 0)
    assert recognised_band(sliding_window_causal_mask_function(5)) == (4, 0)
    assert recognised_band(_mask_function("rebuilt", 5)) is None


@pytest.mark.parametrize("kind", ["own", "rebuilt"])
@pytest.mark.parametrize("window", [None, 4])
@pytest.mark.parametrize("grid", GRIDS)
def test_mask_matches_transformers(grid, window, kind):
    sq, skv, q_off, kv_off = grid
    fn = _mask_function(kind, window)
    args = dict(batch_size=2, q_length=sq, kv_length=skv, q_offset=q_off, kv_offset=kv_off, mask_function=fn)
    got = frost_mask(**args, local_size=window)
    want = sdpa_mask(**args, allow_is_causal_skip=False)
    assert torch.equal(_dense(got, 2), want.expand(2, 1, sq, skv))
    if window is not None and q_off + sq - 1 - kv_off >= window:   # some query reaches past the window
        assert got.bands == ((window - 1, 0),)


@pytest.mark.parametrize("window", [None, 4])
def test_right_padding_matches_transformers(window):
    fn = causal_mask_function if window is None else sliding_window_causal_mask_function(window)
    padding = torch.arange(10)[None, :] < torch.tensor([10, 7, 0])[:, None]
    args = dict(batch_size=3, q_length=10, kv_length=10, mask_function=fn, attention_mask=padding)
    got = frost_mask(**args, local_size=window)
    assert got.seq_len_kv.tolist() == [10, 7, 0] and got.seq_len_kv.dtype == torch.int32
    assert torch.equal(_dense(got, 3), sdpa_mask(**args, allow_is_causal_skip=False))


def test_full_padding_mask_means_no_lengths():
    got = frost_mask(batch_size=2, q_length=5, kv_length=5, attention_mask=torch.ones(2, 5, dtype=torch.bool))
    assert got.seq_len_kv is None


@pytest.mark.parametrize("make", [gpt_oss, mistral])
def test_greedy_generation_matches_eager(make):
    register()
    model = make().eval()
    prompt = batch(batch_size=2, seq_len=9)
    runs = {}
    for impl in ("eager", "frost"):
        model.set_attn_implementation(impl)
        runs[impl] = model.generate(prompt["input_ids"], attention_mask=torch.ones_like(prompt["input_ids"]),
                                    max_new_tokens=6, do_sample=False, output_logits=True,
                                    return_dict_in_generate=True)
    assert torch.equal(runs["eager"].sequences, runs["frost"].sequences)
    for eager_logits, frost_logits in zip(runs["eager"].logits, runs["frost"].logits):
        torch.testing.assert_close(frost_logits, eager_logits)
