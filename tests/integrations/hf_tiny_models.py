"""Tiny transformers models and the FA error rule for comparing frost with eager attention through whole models."""

from __future__ import annotations

import copy

import torch
from transformers import (GptOssConfig, GptOssForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, Qwen3Config, Qwen3ForCausalLM)

import frost.integrations.transformers as frost_hf

VOCAB = 96
SLIDING_WINDOW = 6


def gpt_oss(seed: int = 0, sliding_window: int = SLIDING_WINDOW, **overrides) -> GptOssForCausalLM:
    """2 layers (one sliding, one full; `overrides` may change both), GQA 8:2, head dim 64, sinks of both signs.
    Two experts, both always chosen, so bf16 rounding cannot flip a routing decision between the runs compared."""
    torch.manual_seed(seed)
    shape = dict(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"]) | overrides
    config = GptOssConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=64, num_attention_heads=8,
                          num_key_value_heads=2, head_dim=64, num_local_experts=2, num_experts_per_tok=2,
                          sliding_window=sliding_window, **shape)
    model = GptOssForCausalLM._from_config(config, experts_implementation="eager", dtype=torch.float64)
    signs = torch.tensor([1.0, -1.0]).repeat(4)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.copy_(signs * (0.5 + torch.rand(8, dtype=torch.float64)))
    return model


def llama(seed: int = 0) -> LlamaForCausalLM:
    """2 layers, GQA 8:2, head dim 64."""
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2, head_dim=64)
    return LlamaForCausalLM._from_config(config, dtype=torch.float64)


def mistral(seed: int = 0) -> MistralForCausalLM:
    """2 layers, GQA 8:2, head dim 64, every layer a sliding window."""
    torch.manual_seed(seed)
    config = MistralConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                           num_attention_heads=8, num_key_value_heads=2, head_dim=64, sliding_window=SLIDING_WINDOW)
    return MistralForCausalLM._from_config(config, dtype=torch.float64)


def qwen3(seed: int = 0) -> Qwen3ForCausalLM:
    """2 layers (one full, one sliding), GQA 8:2, head dim 64, q/k norms."""
    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2, head_dim=64, use_sliding_window=True,
                         max_window_layers=1, sliding_window=SLIDING_WINDOW)
    return Qwen3ForCausalLM._from_config(config, dtype=torch.float64)


def batch(batch_size: int = 2, seq_len: int = 20, lengths=None, seed: int = 1) -> dict:
    """Random tokens; `lengths` right-pads row b to lengths[b] valid tokens. Labels cover every position (padded
    ones too), so a padded query row that attends to the wrong keys changes the loss."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch_size, seq_len), generator=g)
    inputs = {"input_ids": ids, "labels": ids.clone()}
    if lengths is not None:
        inputs["attention_mask"] = (torch.arange(seq_len)[None, :] < torch.tensor(lengths)[:, None]).long()
    return inputs


def model_copy(model, impl: str, dtype: torch.dtype, device="cpu"):
    """A fresh copy of `model` in `dtype` on `device` running attention `impl` (frost registered), gradients zero."""
    frost_hf.register()
    m = copy.deepcopy(model).to(device=device, dtype=dtype)
    m.set_attn_implementation(impl)
    m.zero_grad()
    return m


def losses_and_grads(m, token_losses: torch.Tensor) -> dict[str, torch.Tensor]:
    """The backward of the mean token loss: {"loss": per-token losses, parameter name: gradient} in float64.
    Per-token losses, not their mean: a mean can cancel errors."""
    token_losses.mean().backward()
    result = {"loss": token_losses.detach().double()}
    for name, p in m.named_parameters():
        if p.grad is not None:
            result[name] = p.grad.double()
    return result


def loss_and_grads(model, impl: str, dtype: torch.dtype, inputs: dict, device="cpu") -> dict[str, torch.Tensor]:
    """losses_and_grads of a copy of `model` in `dtype` running `impl` and trained on the mean token loss."""
    m = model_copy(model, impl, dtype, device)
    inputs = {k: v.to(device) for k, v in inputs.items()}
    labels = inputs["labels"]
    logits = m(**{k: v for k, v in inputs.items() if k != "labels"}).logits
    token_losses = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(),
                                                     reduction="none")
    return losses_and_grads(m, token_losses)


def max_errors(got: dict, ref: dict) -> dict[str, float]:
    return {name: (got[name] - ref[name]).abs().max().item() for name in ref}


def assert_fa_rule(model, inputs: dict, floor: float = 1e-6, device="cpu",
                   dtypes=(torch.float32, torch.bfloat16)) -> None:
    """FlashAttention's rule, per tensor (the per-token losses and every parameter's gradient): frost's error
    against the fp64 eager model is at most twice eager's own error at the same precision, plus a small floor, in
    each of `dtypes`."""
    ref = loss_and_grads(model, "eager", torch.float64, inputs, device)
    assert set(ref) > {"loss"}, "no parameter received a gradient"
    for dtype in dtypes:
        eager = max_errors(loss_and_grads(model, "eager", dtype, inputs, device), ref)
        frost = max_errors(loss_and_grads(model, "frost", dtype, inputs, device), ref)
        assert set(frost) == set(ref)
        bad = {n: (frost[n], eager[n]) for n in ref
               if not frost[n] <= 2 * eager[n] + floor * max(1.0, ref[n].abs().max().item())}
        assert not bad, f"{dtype}: frost error > 2x eager error + floor for {bad}"
