"""A call's memory layout: dense (B, S, H, D) batches or packed (T, H, D) tokens over cu_seqlens. Packing is a
layout of one implementation, not a second one: the layout says how the caller's tensors map to the IR's logical
shapes ((B, H, S, D), or (H, T, D) ragged over the offsets) and what the caller calls each role. A call's fresh
outputs are api.calls' (they are allocated on every call; the mapping here is first-call work)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from frost import spec
from frost.ir import TensorSpec
from frost.ir.tensors import DTYPE_BYTES, Ragged


@dataclass(frozen=True)
class Layout:
    packed: bool

    @property
    def name(self) -> str:
        return "packed" if self.packed else "dense"

    @property
    def token_axis(self) -> int:
        """The caller's sequence (token) axis of an io tensor: 1 in (B, S, H, D), 0 in (T, H, D)."""
        return 0 if self.packed else 1

    def caller_name(self, role: str) -> str:
        return spec.caller_name(role, self.packed)

    def logical(self, role: str, t: torch.Tensor) -> torch.Tensor:
        """The IR's logical view of a caller's tensor: io tensors swap their token and head axes."""
        if role in spec.IO_ROLES:
            a = self.token_axis
            return t.transpose(a, a + 1)
        return t

    def tensor_spec(self, role: str, t: torch.Tensor, max_seqlens: tuple[int, int] | None) -> TensorSpec:
        """The graph's declaration of a caller's tensor (logical shape and strides; a packed q-side or kv-side
        tensor ragged over its offsets)."""
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype not in DTYPE_BYTES:   # the caller-terms checks name what each role accepts; this is a backstop
            from frost.errors import TensorError

            raise TensorError(f"{self.caller_name(role)}.dtype", t.dtype, ", ".join(DTYPE_BYTES))
        view = self.logical(role, t)
        side = spec.ROLES[role].side
        ragged = None
        if self.packed and side is not None and max_seqlens is not None:
            ragged = Ragged(offsets=f"cu_seqlens_{side}", max_len=max_seqlens[0 if side == "q" else 1])
        return TensorSpec(name=role, shape=tuple(view.shape), strides=tuple(view.stride()), dtype=dtype,
                          ragged=ragged)


DENSE = Layout(packed=False)
PACKED = Layout(packed=True)

__all__ = ["DENSE", "PACKED", "Layout"]
