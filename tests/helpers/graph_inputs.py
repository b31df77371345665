"""Tensors for a graph's inputs, made from its tensor specs (logical shape, declared strides, dtype)."""

from __future__ import annotations

import torch


def empty_for(spec, device="cpu") -> torch.Tensor:
    """An uninitialised tensor with the spec's shape, strides and dtype."""
    return torch.empty_strided(spec.shape, spec.effective_strides, dtype=getattr(torch, spec.dtype), device=device)


def graph_inputs(graph, *, seed: int = 0, device="cpu", lengths=None) -> dict[str, torch.Tensor]:
    """A tensor for every tensor of `graph` that no op writes: floats drawn from N(0, 1) in fp32 from a CPU generator
    seeded with `seed` (the same values on every device), int32 tensors holding lengths(spec) (a list of ints), or
    left uninitialised when `lengths` is None."""
    gen = torch.Generator().manual_seed(seed)
    written = {name for op in graph.ops for name in op.output_names()}
    out = {}
    for spec in graph.tensors:
        if spec.name in written:
            continue
        t = empty_for(spec, device)
        if spec.dtype != "int32":
            t.copy_(torch.randn(spec.shape, generator=gen))
        elif lengths is not None:
            t.copy_(torch.tensor(lengths(spec), dtype=torch.int32))
        out[spec.name] = t
    return out
