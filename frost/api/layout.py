"""A call's memory layout: dense (B, S, H, D) batches or packed (T, H, D) tokens over cu_seqlens. Packing is a
layout of one implementation, not a second one: the layout says how the caller's tensors map to the IR's logical
shapes ((B, H, S, D), or (H, T, D) ragged over the offsets), what the caller calls each role, and how fresh outputs
start (a packed call's tokens outside every sequence are never written, so they start at zero / -inf)."""

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

    def forward_outputs(self, q: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
        """Fresh out (the caller's layout, contiguous) and lse (B, Hq, Sq) / (Hq, Tq) fp32."""
        shape = (*q.shape[:-1], v.shape[-1])
        if self.packed:
            tq, hq = q.shape[0], q.shape[1]
            return {"o": q.new_zeros(shape),
                    "lse": torch.full((hq, tq), float("-inf"), dtype=torch.float32, device=q.device)}
        b, sq, hq = q.shape[:3]
        return {"o": q.new_empty(shape), "lse": torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)}

    def backward_outputs(self, given: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Fresh gradients (frost.spec: dq, dk, dv, and dsink with a sink), each laid out like its input; zeros
        where a kernel may not write every element (packed tokens outside every sequence; dsink)."""
        grads = {}
        for grad in spec.outputs("backward"):
            src = given.get(grad.grad_of or "")
            if src is not None:
                grads[grad.role] = (torch.zeros_like if self.packed or grad.optional else torch.empty_like)(src)
        return grads


DENSE = Layout(packed=False)
PACKED = Layout(packed=True)

__all__ = ["DENSE", "PACKED", "Layout"]
