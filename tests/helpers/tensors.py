"""Random attention inputs in the layouts the tests use, and the small integer tensors that go with them.

Floats are drawn from N(0, 1) in fp32 (on `device`, from `gen`, or torch's global generator when None) and then cast,
so one seed gives the same values in every dtype."""

from __future__ import annotations

import torch


def randn_bhsd(shape, dtype, *, layout: str = "bhsd", gen=None, device="cpu") -> torch.Tensor:
    """A logical (B, H, S, D) tensor; layout "bshd" gives the transposed view of (B, S, H, D) memory."""
    b, h, s, d = shape
    if layout == "bshd":
        return torch.randn((b, s, h, d), generator=gen, device=device).to(dtype).transpose(1, 2)
    assert layout == "bhsd", layout
    return torch.randn((b, h, s, d), generator=gen, device=device).to(dtype)


def randn_bshd(b: int, s: int, h: int, d: int, dtype=torch.float32, *, gen=None, device="cpu") -> torch.Tensor:
    """A (B, S, H, D) tensor: the public API's layout."""
    return torch.randn(b, s, h, d, generator=gen, device=device).to(dtype)


def randn_thd(tokens: int, heads: int, dim: int, dtype, *, gen=None, device="cpu", spread: bool = False):
    """A packed (T, H, D) tensor; `spread`: a view with twice the dense token stride (non-contiguous tokens)."""
    t = torch.randn((tokens, heads, dim * (2 if spread else 1)), generator=gen, device=device).to(dtype)
    return t[..., :dim] if spread else t


def int32(values, device="cpu") -> torch.Tensor | None:
    """Per-batch lengths (or any ints) as an int32 tensor; None stays None."""
    return None if values is None else torch.tensor(list(values), dtype=torch.int32, device=device)


def cu_seqlens(lens, device="cpu") -> torch.Tensor:
    """The int32 prefix sums (B + 1,) of packed sequence lengths: sequence b owns tokens [cu[b], cu[b + 1])."""
    total, out = 0, [0]
    for n in lens:
        total += int(n)
        out.append(total)
    return torch.tensor(out, dtype=torch.int32, device=device)


def sink_tensor(spec, heads: int, device="cpu") -> torch.Tensor | None:
    """A (Hq,) fp32 sink from a test's spec: a list of per-head values, one value for every head, or None."""
    if spec is None:
        return None
    values = list(spec) if isinstance(spec, (list, tuple)) else [float(spec)] * heads
    return torch.tensor(values, dtype=torch.float32, device=device)
