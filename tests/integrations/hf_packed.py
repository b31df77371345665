"""Padding-free batches for the tiny models: the same documents flattened into packed rows (position_ids
restarting at 0, optionally with DataCollatorWithFlattening's cu_seq_lens_* / max_length_* kwargs), right-padded
one per row, or packed with an explicit block-diagonal 4-D mask for eager; and FlashAttention's error rule between
frost on the packed batch and eager on one of the other two."""

from __future__ import annotations

import torch
from transformers import DataCollatorWithFlattening

from hf_tiny_models import VOCAB, losses_and_grads, max_errors, model_copy

FORMS = ("position_ids", "collator")   # position_ids alone; the collator's position_ids and flash kwargs


def documents(lengths, seed: int = 1) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in lengths]


def flattened(docs: list[list[int]], form: str, rows: int = 1) -> tuple[dict, torch.Tensor]:
    """(model inputs, predictor token indices): `rows` packed rows of equal length (documents in order, split
    where a row is full), positions restarting at 0 per document. form "collator" is DataCollatorWithFlattening
    with return_flash_attn_kwargs=True (one row only), "position_ids" gives the positions alone."""
    if form == "collator":
        assert rows == 1, "the collator packs one row"
        inputs = DataCollatorWithFlattening(return_flash_attn_kwargs=True)([{"input_ids": d} for d in docs])
        inputs.pop("labels")
    else:
        ids = torch.tensor([t for d in docs for t in d])
        pos = torch.tensor([i for d in docs for i in range(len(d))])
        assert ids.numel() % rows == 0, "rows must hold the same number of tokens"
        inputs = {"input_ids": ids.view(rows, -1), "position_ids": pos.view(rows, -1)}
        assert all(int(r[0]) == 0 for r in inputs["position_ids"]), "a document may not straddle two rows"
    starts = torch.tensor([0, *[len(d) for d in docs]]).cumsum(0)[:-1].tolist()
    return inputs, _predictors(starts, [len(d) for d in docs])


def padded(docs: list[list[int]]) -> tuple[dict, torch.Tensor]:
    """(model inputs, predictor token indices): one document per row, right-padded, with the 2-D attention_mask."""
    width = max(len(d) for d in docs)
    ids = torch.zeros(len(docs), width, dtype=torch.long)
    mask = torch.zeros(len(docs), width, dtype=torch.long)
    for b, d in enumerate(docs):
        ids[b, :len(d)], mask[b, :len(d)] = torch.tensor(d), 1
    return {"input_ids": ids, "attention_mask": mask}, _predictors([b * width for b in range(len(docs))],
                                                                  [len(d) for d in docs])


def block_masks(model, docs: list[list[int]], rows: int = 1) -> dict[str, torch.Tensor]:
    """Per layer type of the model, the (rows, 1, S, S) bool mask that keeps documents apart on the packed layout:
    key j of query i is kept iff both are in one document, j <= i, and (on a sliding layer of window W)
    i - j < W. A model without layer_types has one type: sliding when its config has a window."""
    doc = torch.tensor([n for n, d in enumerate(docs) for _ in d]).view(rows, -1)
    i, j = torch.arange(doc.shape[1])[:, None], torch.arange(doc.shape[1])[None, :]
    keep = (doc[:, :, None] == doc[:, None, :]) & (j <= i)
    window = getattr(model.config, "sliding_window", None)
    types = getattr(model.config, "layer_types", None) or ["sliding_attention" if window else "full_attention"]
    return {t: (keep & (i - j < window) if t == "sliding_attention" else keep)[:, None] for t in set(types)}


def _predictors(starts: list[int], lengths: list[int]) -> torch.Tensor:
    """Flat indices of the tokens that predict a next token of their own document, document by document: the same
    order in the packed and the padded layout, so their per-token losses line up."""
    return torch.tensor([s + t for s, n in zip(starts, lengths) for t in range(n - 1)], dtype=torch.long)


def loss_and_grads(model, impl: str, dtype: torch.dtype, inputs: dict, predictors: torch.Tensor, device="cpu",
                   use_cache: bool = False) -> dict[str, torch.Tensor]:
    """{"loss": per-token losses of the predictors, parameter name: gradient of their mean} in float64, for a copy
    of `model` in `dtype` running `impl` (with a fresh dynamic cache when use_cache)."""
    m = model_copy(model, impl, dtype, device)
    inputs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    if isinstance(inputs.get("attention_mask"), dict):   # block masks: additive, in the run's dtype
        lowest = torch.finfo(dtype).min
        masks = {t: torch.zeros(k.shape, dtype=dtype, device=device).masked_fill_(~k.to(device), lowest)
                 for t, k in inputs["attention_mask"].items()}
        inputs["attention_mask"] = masks if len(masks) > 1 else next(iter(masks.values()))
    logits = m(**inputs, use_cache=use_cache).logits.flatten(0, 1)
    ids = inputs["input_ids"].flatten()
    predictors = predictors.to(device)
    token_losses = torch.nn.functional.cross_entropy(logits[predictors].float(), ids[predictors + 1],
                                                     reduction="none")
    return losses_and_grads(m, token_losses)


def assert_packed_fa_rule(model, docs: list[list[int]], form: str = "position_ids", rows: int = 1,
                          reference: str = "padded", floor: float = 1e-6, device="cpu",
                          dtypes=(torch.float32,), use_cache: bool = False) -> None:
    """FlashAttention's rule, per tensor (the per-token losses and every parameter's gradient): frost on the packed
    batch is within twice eager's own error plus a small floor (_floor), both against fp64 eager, in each of
    `dtypes`.
    Eager runs the reference layout: "padded" (one document per right-padded row: documents apart by
    construction, independent of any mask built here; in fp32 the other ops' rounding on the two layouts stays
    far below the floor, in bf16 it does not) or "masked" (the packed rows with block_masks: every op but
    attention runs on the same layout as frost's, so the rule holds in bf16 too)."""
    packed_inputs, packed_predictors = flattened(docs, form, rows)
    if reference == "padded":
        ref_inputs, ref_predictors = padded(docs)
    else:
        ref_inputs = {"input_ids": packed_inputs["input_ids"], "position_ids": flattened(docs, "position_ids", rows)[0]
                      ["position_ids"], "attention_mask": block_masks(model, docs, rows)}
        ref_predictors = packed_predictors
    ref = loss_and_grads(model, "eager", torch.float64, ref_inputs, ref_predictors, device)
    assert set(ref) > {"loss"}, "no parameter received a gradient"
    for dtype in dtypes:
        eager = max_errors(loss_and_grads(model, "eager", dtype, ref_inputs, ref_predictors, device), ref)
        frost = max_errors(loss_and_grads(model, "frost", dtype, packed_inputs, packed_predictors, device,
                                          use_cache), ref)
        bad = {n: (frost[n], eager[n]) for n in ref if not frost[n] <= 2 * eager[n] + _floor(floor, dtype, ref[n])}
        assert not bad, f"{dtype}: frost (packed) error > 2x eager ({reference}) error + floor for {bad}"


def _floor(floor: float, dtype: torch.dtype, ref: torch.Tensor) -> float:
    """The rule's floor for one tensor: `floor` at its largest reference value (at least 1), and at least one unit
    of `dtype`'s precision there: an error smaller than the stored result's own rounding says nothing (a bf16
    gradient of 0.007 is stored to within 3e-5)."""
    largest = ref.abs().max().item()
    return max(floor * max(1.0, largest), torch.finfo(dtype).eps * largest)
