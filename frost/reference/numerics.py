"""Precision rules of the reference engine, the same a kernel follows: fp16/bf16 inputs are computed in fp32
(exact upcast, fp32 matmul accumulation) and the operands a kernel feeds back to the tensor core (P, dS) are
rounded to the io dtype first; fp32 stays fp32 and fp64 stays fp64 (the oracle)."""

from __future__ import annotations

import torch

IO_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_HALF = (torch.float16, torch.bfloat16)


def compute_dtype(io_dtype: torch.dtype) -> torch.dtype:
    """fp64 for the oracle, fp32 for everything else (also the dtype of LSE and dSink outputs)."""
    return torch.float64 if io_dtype == torch.float64 else torch.float32


def as_operand(x: torch.Tensor, io_dtype: torch.dtype) -> torch.Tensor:
    """Round a compute-dtype tile to the io dtype when a kernel would (P before P·V and Pᵀ·dO, dS before
    dS·K and dSᵀ·Q), keeping the compute dtype so the matmul still accumulates in fp32."""
    if io_dtype in _HALF:
        return x.to(io_dtype).to(x.dtype)
    return x
