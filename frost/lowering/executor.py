"""Binding runtime tensors to a plan. Everything that depends only on the plan (expected dtypes, shapes, strides,
devices, workspace regions) is computed once here; a call then costs a few tuple comparisons per tensor. Errors are
frost.errors.TensorError naming the tensor, the value and what would be accepted."""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field

import torch

from frost.errors import GraphError, TensorError
from frost.ir.tensors import TensorSpec, check_tensor
from frost.lowering.devices import present_device
from frost.lowering.keys import TensorSignature, spec_signature, tensor_signature
from frost.lowering.workspace import ALIGN, carve

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
                "float64": torch.float64, "int32": torch.int32}


@dataclass(frozen=True)
class Expect:
    """What one graph tensor must look like at run time."""

    name: str
    what: str                  # e.g. "q of op 'attn'", for messages
    dtype: torch.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    signature: TensorSignature
    output: bool = False
    aligned: bool = False      # the data pointer must be 16-byte aligned (checked every call)
    also: set = field(default_factory=set, compare=False)   # other strides already accepted (kept small)

    def subject(self, attr: str = "") -> str:
        return f"tensor {self.name!r} ({self.what}){'.' + attr if attr else ''}"


def _ports(op):
    """(port, graph tensor name) of each connected port of ``op``, inputs then outputs (a generic op's ports by
    position)."""
    for ports in (op.inputs, op.outputs):
        pairs = ports.model_dump().items() if hasattr(ports, "model_dump") else enumerate(ports)
        yield from ((role, name) for role, name in pairs if name is not None)


def _roles(graph, served: set[str]) -> dict[str, str]:
    """tensor name -> "role of op 'x'" for the tensors of the ops the plan runs."""
    roles: dict[str, str] = {}
    for op in graph.ops:
        if op.name in served:
            for role, name in _ports(op):
                roles.setdefault(name, f"{role} of op {op.name!r}")
    return roles


def _port_renames(op) -> tuple[re.Pattern, dict[str, str]] | None:
    """The op's named ports whose graph tensor is named otherwise (cu_seqlens_q -> 'cu'), as a pattern of whole
    words and the names to put in their place (None: every port's tensor has the port's name)."""
    names = {role: name if name.isidentifier() else repr(name)
             for role, name in _ports(op) if isinstance(role, str) and name != role}
    if not names:
        return None
    return re.compile(r"\b(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b"), names


def in_graph_terms(exc: TensorError, renames: tuple[re.Pattern, dict[str, str]] | None) -> TensorError:
    """An engine's TensorError with the op's port names replaced by the graph tensors' names (in the subject and in
    what is accepted), unless it was found in an earlier call (deferred: another plan's tensors, maybe)."""
    if renames is None or getattr(exc, "earlier_call", False):
        return exc
    pattern, names = renames
    rename = lambda text: pattern.sub(lambda m: names[m.group(1)], text)   # noqa: E731
    return type(exc)(rename(exc.subject), exc.value, rename(exc.accepted), exc.detail)


def _expect(spec: TensorSpec, what: str, output: bool, aligned: bool) -> Expect:
    """A tensor with a sequence (or token) axis, dense (B, H, S, ...) or ragged (H, T, ...), takes the plan's pointer
    alignment; the small per-batch and per-head tensors do not."""
    streamed = len(spec.shape) >= 3 or spec.ragged is not None
    return Expect(spec.name, what, TORCH_DTYPES[spec.dtype], spec.shape, spec.effective_strides,
                  spec_signature(spec), output, aligned and streamed)


def check_tensor_against(t, e: Expect, device: torch.device) -> None:
    """Raise TensorError unless `t` matches `e` on `device`. Strides may differ from the planned ones (kernels take
    strides at run time) as long as they do not overlap and keep what compiled code depends on: a unit head-dim
    stride and 16-byte strides where the plan had them."""
    if not isinstance(t, torch.Tensor):
        raise TensorError(e.subject(), type(t).__name__, "a torch.Tensor")
    if t.dtype is not e.dtype:
        raise TensorError(e.subject("dtype"), t.dtype, str(e.dtype))
    if tuple(t.shape) != e.shape:
        raise TensorError(e.subject("shape"), tuple(t.shape), f"{e.shape} (the shape the plan was compiled for)")
    if t.device != device:
        raise TensorError(e.subject("device"), str(t.device),
                          f"{device} (the call's device, set by its first input; one device per call)")
    _check_strides(t, e)


def _check_strides(t: torch.Tensor, e: Expect) -> None:
    strides = tuple(t.stride())
    if strides == e.strides:
        return
    try:
        check_tensor(TensorSpec(name=e.name, shape=e.shape, strides=strides, dtype=e.signature.dtype))
    except GraphError as exc:
        raise TensorError(e.subject("strides"), strides, "non-overlapping strides, no broadcast (stride-0) views",
                          str(exc)) from None
    got, want = tensor_signature(t), e.signature
    if (want.inner_unit and not got.inner_unit) or (want.strides_aligned16 and not got.strides_aligned16):
        raise TensorError(e.subject("strides"), strides, f"{e.strides}, or any strides with {_needs(want)}",
                          f"this tensor has head-dim stride {strides[-1] if strides else None}"
                          f"{'' if got.strides_aligned16 else ' and strides that are not multiples of 16 bytes'}")
    if len(e.also) < 16:
        e.also.add(strides)


def _needs(s: TensorSignature) -> str:
    needs = ["head-dim stride 1" if s.inner_unit else "any head-dim stride"]
    if s.strides_aligned16:
        needs.append("every other stride a multiple of 16 bytes")
    return " and ".join(needs)


class Executor:
    def __init__(self, plan) -> None:
        served = {op.op_name for op in plan.ops}
        graph, roles = plan.graph, _roles(plan.graph, served)
        written = {n for op in graph.ops if op.name in served for n in op.output_names()}
        specs = graph.tensor_map()
        used = [n for n in roles if n in specs]
        aligned = any(op.lowering.aligned_pointers for op in plan.ops)
        self.inputs = tuple(_expect(specs[n], roles[n], False, aligned) for n in used if n not in written)
        self.outputs = tuple(_expect(specs[n], roles[n], True, aligned) for n in used if n in written)
        self.expects = self.inputs + self.outputs
        self.output_names = tuple(e.name for e in self.outputs)
        self.table = tuple((e, e.name, e.dtype, e.shape, e.strides, e.also, e.aligned) for e in self.expects)
        self.known = frozenset(specs)   # any graph tensor may be passed; only the served ops' ones are bound
        self.runs = tuple((op.lowering.run, op.regions) for op in plan.ops)
        ops = {op.name: op for op in graph.ops}
        self.renames = tuple(_port_renames(ops[op.op_name]) for op in plan.ops)
        self.workspace_size = plan.workspace.size
        types = {op.lowering.device_type for op in plan.ops} - {None}
        if len(types) > 1:
            raise GraphError("plan devices", sorted(types), "ops whose engines run on one device type")
        self.device_type = types.pop() if types else None
        self.no_views = tuple({} for _ in self.runs)
        self.last_views = None
        seq_major = tuple(op.lowering.run_seq_major for op in plan.ops)
        self.seq_major_runs = None if None in seq_major else seq_major
        self.aligned = tuple(e for e in self.expects if e.aligned)

    def execute(self, tensors: dict, workspace, stream) -> dict:
        """The hot path: one pass over the plan's tensors, comparing each with what the plan expects."""
        if not isinstance(tensors, dict) or not self.known.issuperset(tensors):
            self._unknown(tensors)
        if stream is not None and not _is_stream(stream):
            raise TensorError("stream", stream, STREAM_ACCEPTED)
        device = self._device(tensors)
        get, allocated = tensors.get, None
        for e, name, dtype, shape, strides, also, aligned in self.table:
            t = get(name)
            if t is None:
                t = self._missing(e, device)
                allocated = allocated or {}
                allocated[name] = t
            else:
                try:
                    ok = t.dtype is dtype and t.shape == shape and t.device == device and (
                        (got := t.stride()) == strides or got in also)
                except AttributeError:
                    ok = False
                if not ok:
                    check_tensor_against(t, e, device)
            if aligned and t.data_ptr() & 15:
                _misaligned(e, t)
        bound = tensors if allocated is None else {**tensors, **allocated}
        if device.type == "meta":   # shapes without data (a meta-device model): checked, not computed
            return {name: bound[name] for name in self.output_names}
        views = self._workspace(workspace, device)
        for (run, _), ws, renames in zip(self.runs, views, self.renames):
            try:
                run(bound, ws, stream)
            except TensorError as exc:   # an engine's value check names the op's port: name the graph's tensor
                raise in_graph_terms(exc, renames) from exc
        return {name: bound[name] for name in self.output_names}

    def execute_trusted_seq_major(self, tensors: dict, device) -> None:
        """Plan.run_trusted_seq_major: the alignment checks, a fresh workspace, the runs."""
        for e in self.aligned:
            t = tensors[e.name]
            if t.data_ptr() & 15:
                _misaligned(e, t)
        for run, ws in zip(self.seq_major_runs, self._workspace(None, device)):
            run(tensors, ws, None)

    def _missing(self, e: Expect, device) -> torch.Tensor:
        if not e.output:
            raise TensorError(e.subject(), None, "a torch.Tensor", "missing from the tensors passed to execute")
        return torch.empty_strided(e.shape, e.strides, dtype=e.dtype, device=device)

    def _unknown(self, tensors) -> None:
        if not isinstance(tensors, dict):
            raise TensorError("tensors", type(tensors).__name__, "a dict of graph tensor name -> torch.Tensor")
        extra = sorted(set(tensors) - self.known)
        raise TensorError("tensors", extra, f"names of the graph's tensors ({', '.join(sorted(self.known))})")

    def _device(self, tensors: dict) -> torch.device:
        """The call's device: the first input's (every other tensor is compared with it)."""
        first = self.inputs[0]
        t = tensors.get(first.name)
        if not isinstance(t, torch.Tensor):
            missing = "missing from the tensors passed to execute" if t is None else ""
            raise TensorError(first.subject(), type(t).__name__ if t is not None else None, "a torch.Tensor", missing)
        device = t.device
        if self.device_type is not None and device.type != self.device_type:
            raise TensorError(first.subject("device"), str(device),
                              f"a {self.device_type} device (the plan's engine runs there)")
        return device

    def _workspace(self, workspace, device) -> tuple[dict, ...]:
        """Region views (workspace.RegionView) of the caller's buffer. Views of the last buffer are reused while
        that same tensor object comes back at the same address (the common loop); they are dropped when the caller
        drops the buffer."""
        if workspace is None:  # a buffer of this call's own: carved where it starts aligned, not remembered
            if self.workspace_size == 0:
                return self.no_views
            buf, skip = self._aligned_buffer(device)
            return tuple(carve(buf, regions, skip) for _, regions in self.runs)
        else:
            hit = self.last_views
            if hit is not None and hit[0]() is workspace and hit[1] == workspace.data_ptr():
                return hit[2]
            check_workspace(workspace, self.workspace_size, device)
        views = tuple(carve(workspace, regions) for _, regions in self.runs)
        self.last_views = (weakref.ref(workspace, self._forget), workspace.data_ptr(), views)
        return views

    def _forget(self, ref) -> None:
        if self.last_views is not None and self.last_views[0] is ref:
            self.last_views = None

    def new_workspace(self, device=None) -> torch.Tensor:
        """workspace_size bytes starting on a 256-byte boundary."""
        buf, skip = self._aligned_buffer(present_device(device))
        return buf[skip:skip + self.workspace_size]

    def _aligned_buffer(self, device) -> tuple[torch.Tensor, int]:
        """(buffer, skip): workspace_size bytes start ``skip`` bytes in, on a 256-byte boundary (over-allocated by
        256 where the allocator's own alignment is smaller, e.g. on CPU)."""
        buf = torch.empty(self.workspace_size + ALIGN, dtype=torch.uint8, device=device)
        return buf, -buf.data_ptr() % ALIGN

    def new_outputs(self, device=None) -> dict:
        device = present_device(device)
        return {e.name: torch.empty_strided(e.shape, e.strides, dtype=e.dtype, device=device) for e in self.outputs}


STREAM_ACCEPTED = "None (the current stream), a torch.cuda.Stream, a cuda.CUstream or a raw stream handle (an int)"


def _is_stream(stream: object) -> bool:
    """What the engines can launch on: an object with a raw handle (.cuda_stream), an int that is no bool, or a
    driver handle that converts to one (cuda.CUstream)."""
    if isinstance(stream, bool):
        return False
    if isinstance(stream, int) or hasattr(stream, "cuda_stream"):
        return True
    return hasattr(stream, "__int__") and not isinstance(stream, (float, torch.Tensor))


def _misaligned(e: Expect, t: torch.Tensor) -> None:
    raise TensorError(e.subject("data_ptr"), hex(t.data_ptr()), "a 16-byte aligned address (the kernels use "
                      "vectorised loads)", "a view starting mid-row; pass a fresh or cloned tensor")


def check_workspace(ws, size: int, device: torch.device) -> None:
    subject = "workspace"
    if not isinstance(ws, torch.Tensor):
        raise TensorError(subject, type(ws).__name__, f"a torch.Tensor of at least {size} bytes (plan.new_workspace())")
    if ws.dtype is not torch.uint8 or ws.dim() != 1 or ws.stride(0) != 1:
        raise TensorError(subject, f"{ws.dtype} shape {tuple(ws.shape)} strides {ws.stride()}",
                          "a contiguous 1-D torch.uint8 tensor (plan.new_workspace())")
    if ws.numel() < size:
        raise TensorError(f"{subject}.numel", ws.numel(), f">= plan.workspace_size = {size} bytes")
    if ws.device != device:
        raise TensorError(f"{subject}.device", str(ws.device), f"{device} (the device of the call's tensors)")
    if ws.data_ptr() % ALIGN:
        raise TensorError(f"{subject}.data_ptr", hex(ws.data_ptr()), f"a {ALIGN}-byte aligned address")
