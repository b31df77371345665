"""One implementation of a functional call, forward or backward, dense or packed (the layout is an argument).

A call is keyed by its tensors' dtypes, shapes, strides and device plus its options (and a packed call's
max_seqlens); the first call with a key checks every tensor in the caller's terms (api.checks), builds a one-op graph
in logical shapes and its plan; later calls reuse the plan. On a kernel engine a later call skips plan.execute's
per-tensor checks (the key holds what they compare; only the pointers' 16-byte alignment is checked) and passes the
caller's tensors as they are. An empty problem (no batch, no query or no key) is a graph like any other: the
reference engine serves it.

Packing is a layout of this one implementation, not a second one: a Layout (dense (B, S, H, D) batches or packed
(T, H, D) tokens over cu_seqlens) says how the caller's tensors map to the IR's logical shapes ((B, H, S, D), or
(H, T, D) ragged over the offsets) and what the caller calls each role."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Hashable, Optional, Union, cast

import torch

from frost import spec
from frost.api.arguments import Options
from frost.api.checks import check_tensors, in_caller_terms
from frost.api.plans import build_plan
from frost.api.plans import target_of
from frost.errors import FrostError, TensorError
from frost.ir import (ForwardAttrs, Graph, SdpaBackwardOp, SdpaForwardInputs, SdpaForwardOp, SdpaForwardOutputs,
                      SdpaInputs, SdpaOutputs, TensorSpec)
from frost.ir.tensors import DTYPE_BYTES, Ragged
from frost.lowering import compiler
from frost.lowering.plan_cache import PLANS


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


@dataclass(frozen=True)
class Call:
    """What one functional call computes: its kind, layout, input tensors by IR role, gated options, a packed
    call's max_seqlens and a backward's resolved mode."""

    kind: spec.Kind
    layout: Layout
    given: dict[str, torch.Tensor]
    options: Options
    max_seqlens: Optional[tuple[int, int]] = None
    deterministic: bool = False

    def key(self) -> tuple[Hashable, ...]:
        """The plan-cache key: everything the plan depends on (computed once per Call)."""
        return self._key

    @cached_property
    def _key(self) -> tuple[Hashable, ...]:
        metas = tuple((r, t.dtype, t.shape, t.stride(), t.device) for r, t in self.given.items())
        return (self.kind, self.layout.packed, self.options.mask(), self.max_seqlens, self.deterministic,
                compiler.generation, *metas)

    def graph(self, outputs: dict[str, torch.Tensor]) -> Graph:
        """The call's one-op graph in logical shapes, tensors named by IR role (as the plan's fast path expects)."""
        tensors = self.given | outputs
        specs = {r: self.layout.tensor_spec(r, t, self.max_seqlens) for r, t in tensors.items()}
        o = self.options
        mask: ForwardAttrs = dict(attn_scale=o.softmax_scale, causal=o.causal, alignment=o.alignment,
                                  band_left=o.left, band_right=o.right)
        named = {r: r for r in self.given if r not in ("q", "k", "v")}
        op: Union[SdpaForwardOp, SdpaBackwardOp]
        if self.kind == "forward":
            op = SdpaForwardOp(name="attn", inputs=SdpaForwardInputs(q="q", k="k", v="v", **named),
                               outputs=SdpaForwardOutputs(o="o", lse="lse"), **mask)
        else:
            op = SdpaBackwardOp(name="attn", inputs=SdpaInputs(q="q", k="k", v="v", **named),
                                outputs=SdpaOutputs(**{r: r for r in outputs}),
                                deterministic=self.deterministic, **mask)
        suffix = "_varlen" if self.layout.packed else ""
        return Graph(name=f"sdpa_{self.kind}{suffix}", tensors=tuple(specs.values()), ops=(op,))

    def checked_graph(self, outputs: dict[str, torch.Tensor]) -> Graph:
        """graph(), after the caller-terms checks; an IR error that still fires is renamed to the caller's
        arguments."""
        check_tensors(self.given, self.layout.packed)
        try:
            return self.graph(outputs)
        except FrostError as exc:
            raise in_caller_terms(exc, self.layout.packed) from exc


def run(call: Call, make_outputs: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Fresh outputs (by role) filled through the call's plan. A new key's tensors are checked before anything is
    allocated from their shapes. On the meta device (no data) the call is checked as a first call is and its
    outputs are returned as allocated: their shapes, dtypes and strides are the real call's."""
    device = call.given["q"].device
    if device.type == "meta":   # shapes without data (shape inference, meta-device models): checked, not computed
        outputs = make_outputs()
        call.checked_graph(outputs)
        return outputs
    key = call.key()
    plan = PLANS.get(key)
    if plan is None:
        check_tensors(call.given, call.layout.packed)
    outputs = make_outputs()
    if plan is None:
        plan = PLANS.get_or_build(key, lambda: build_plan(call.checked_graph(outputs), target_of(device)))
    tensors = call.given | outputs
    try:
        if plan.run_trusted_seq_major is not None:
            plan.run_trusted_seq_major(tensors, device)
        else:
            plan.execute({r: call.layout.logical(r, t) for r, t in tensors.items()})
    except TensorError as exc:   # a pointer's alignment or a length's value
        raise in_caller_terms(exc, call.layout.packed) from exc
    return outputs


def forward_outputs(call: Call) -> dict[str, torch.Tensor]:
    """Fresh out (the caller's layout, contiguous) and lse (B, Hq, Sq) / (Hq, Tq) fp32. A packed call's tokens
    outside every sequence are never written, so they start at zero / -inf."""
    q, v = call.given["q"], call.given["v"]
    shape = (*q.shape[:-1], v.shape[-1])
    if call.layout.packed:
        tq, hq = q.shape[0], q.shape[1]
        return {"o": q.new_zeros(shape),
                "lse": torch.full((hq, tq), float("-inf"), dtype=torch.float32, device=q.device)}
    b, sq, hq = q.shape[:3]
    return {"o": q.new_empty(shape), "lse": torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)}


_GRADIENTS = tuple((grad.role, grad.grad_of or "", grad.optional) for grad in spec.outputs("backward"))


def backward_outputs(call: Call) -> dict[str, torch.Tensor]:
    """Fresh gradients (frost.spec: dq, dk, dv, and dsink with a sink), each laid out like its input; zeros where a
    kernel may not write every element (packed tokens outside every sequence; dsink)."""
    grads = {}
    for role, of, optional in _GRADIENTS:
        src = call.given.get(of)
        if src is not None:
            grads[role] = (torch.zeros_like if call.layout.packed or optional else torch.empty_like)(src)
    return grads


def forward(call: Call) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of a forward call."""
    outputs = run(call, lambda: forward_outputs(call))
    return outputs["o"], outputs["lse"]


def backward(call: Call) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """The gradients of a backward call in frost.spec's order: dq, dk, dv, then the optional input's (None when
    the call does not give that input)."""
    grads = run(call, lambda: backward_outputs(call))
    return cast(tuple[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]],
                tuple(grads.get(role) for role, _, _ in _GRADIENTS))


__all__ = ["Call", "backward", "forward", "run"]
