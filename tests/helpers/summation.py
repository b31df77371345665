"""Comparing two results that differ only in summation order.

Two computations of the same math over tensors in different memory layouts (a token-major lse, a sliced q) reduce
in different orders: torch picks its vectorised reduction by layout, and the CPU's instruction set and thread count
change it again. Their results agree to a few units in the last place of the compute dtype, not bitwise, so a test
of "the layout does not matter" compares within that, never with torch.equal."""

from __future__ import annotations

import torch

# relative error of a sum of n terms in a different order: ~ n * eps of the compute dtype; the reductions here are
# over a few thousand terms at most, and a result in a half dtype may round one ulp apart after an fp32 sum
_RTOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}


def assert_same_up_to_summation_order(a: torch.Tensor, b: torch.Tensor, what: str = "") -> None:
    """a and b equal within a few ulps of their dtype (relative to the larger magnitude), with the same NaN and
    infinity pattern; the dtypes and shapes must match exactly."""
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
    rtol = _RTOL[a.dtype]
    scale = max(a.detach().float().abs().nan_to_num(posinf=0, neginf=0).max().item() if a.numel() else 0.0, 1e-30)
    torch.testing.assert_close(a, b, rtol=rtol, atol=rtol * scale, equal_nan=True, msg=lambda m: f"{what}: {m}")
