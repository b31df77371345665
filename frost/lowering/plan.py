"""The plan: what runs for a graph, decided once. Kernels to launch (each with its compile key and grid), the
workspace layout and size, and per op the engine that serves it. `execute` binds runtime tensors to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Union

from frost.analyzer.facts import Facts
from frost.lowering.workspace import Region, WorkspaceLayout

if TYPE_CHECKING:   # types only: a plan imports torch and the executor when it is built, not before
    import torch

    from frost.analyzer.probe import SupportReport
    from frost.ir import Graph
    from frost.lowering.executor import Executor
    from frost.lowering.workspace import RegionView

# run(tensors by graph name, workspace regions by name, stream): the stream is passed through to the engine as the
# caller gave it (None: the current stream; a torch.cuda.Stream, a cuda.CUstream or a raw handle)
Run = Callable[[dict[str, "torch.Tensor"], dict[str, "RegionView"], object], None]
Device = Union["torch.device", str, int, None]


@dataclass(frozen=True)
class KernelLaunch:
    name: str                              # e.g. "attn/backward"
    compile_key: str                       # equal keys share one compiled kernel (and one disk-cache entry)
    grid: tuple[int, int, int] | None      # None for the reference engine (torch math, no launch of its own)


@dataclass(frozen=True)
class Lowering:
    """What an engine makes of one op: launches, workspace requests (name, nbytes), and the function that runs it.

    `run(tensors, workspace, stream)` gets the bound tensors by graph name and this op's workspace regions by
    region name (workspace.RegionView: an address; ``.tensor()`` for the bytes); it must not allocate when the
    engine promises an allocation-free path."""

    kernels: tuple[KernelLaunch, ...]
    workspace: tuple[tuple[str, int], ...]
    run: Run
    device_type: str | None = None         # tensors must live on this device type; None = any (one device per call)
    aligned_pointers: bool = False         # data pointers must be 16-byte aligned (vectorised / TMA loads)
    # run() for 4-D tensors passed in (B, S, H, D) order (not transposed into the graph's logical (B, H, S, D)),
    # for a caller whose own cache key already pins every tensor to the plan (the functional API); None: not offered
    run_seq_major: Run | None = None


@dataclass(frozen=True)
class OpPlan:
    op_name: str
    engine: str
    facts: Facts
    lowering: Lowering
    regions: tuple[Region, ...]            # this op's workspace regions, offsets into the plan's buffer


@dataclass(eq=False)
class Plan:
    """A compiled graph. `execute` is the hot path; everything else here is decided once."""

    graph: Graph
    target: str
    ops: tuple[OpPlan, ...]
    workspace: WorkspaceLayout
    report: SupportReport | None = None    # the probe's SupportReport: why each engine was or was not chosen
    _executor: Executor = field(init=False, repr=False)
    # the functional API's hot path (frost.api.calls), or None where an op's engine does not offer it: every tensor
    # (outputs included) by graph name, the 4-D ones in (B, S, H, D) order (packed ones (T, H, D)), all on one
    # device; nothing is checked but the pointers' alignment, because the caller's plan key holds each tensor's
    # dtype, shape, strides and device and it built this plan from exactly those (checked then)
    run_trusted_seq_major: Optional[Callable[[dict[str, torch.Tensor], torch.device], None]] = \
        field(init=False, repr=False)

    def __post_init__(self) -> None:
        from frost.lowering.executor import Executor

        self._executor = Executor(self)
        seq_major = self._executor.seq_major_runs is not None
        self.run_trusted_seq_major = self._executor.execute_trusted_seq_major if seq_major else None

    @property
    def engine(self) -> str:
        """The engine serving the graph ("+"-joined when ops are served by different engines)."""
        return "+".join(dict.fromkeys(op.engine for op in self.ops))

    @property
    def engines(self) -> dict[str, str]:
        return {op.op_name: op.engine for op in self.ops}

    @property
    def kernels(self) -> tuple[KernelLaunch, ...]:
        return tuple(k for op in self.ops for k in op.lowering.kernels)

    @property
    def compile_keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k.compile_key for k in self.kernels))

    @property
    def workspace_size(self) -> int:
        return self.workspace.size

    def execute(self, tensors: dict[str, torch.Tensor], workspace: torch.Tensor | None = None, *,
                stream: object = None) -> dict[str, torch.Tensor]:
        """Run the graph. `tensors` maps graph tensor names to torch tensors (logical shapes as declared); outputs
        given there are written in place, missing ones are allocated. With every output and a `workspace` of
        `workspace_size` bytes passed in, the kernel engines allocate nothing and never synchronise. Returns the
        outputs by name."""
        return self._executor.execute(tensors, workspace, stream)

    def new_workspace(self, device: Device = None) -> torch.Tensor:
        """A buffer for `execute(..., workspace=...)`: allocate once, reuse every call."""
        return self._executor.new_workspace(device)

    def new_outputs(self, device: Device = None) -> dict[str, torch.Tensor]:
        """Freshly allocated outputs with the planned strides, to pass to `execute` (then written in place)."""
        return self._executor.new_outputs(device)

    def describe(self) -> str:
        lines = [f"plan for graph {self.graph.name!r} on {self.target}: engine {self.engine}, "
                 f"workspace {self.workspace_size} bytes"]
        for op in self.ops:
            lines.append(f"  op {op.op_name!r} -> {op.engine}")
            lines += [f"    kernel {k.name} grid={k.grid} key={k.compile_key}" for k in op.lowering.kernels]
            lines += [f"    workspace {r.name} @{r.offset} ({r.nbytes} bytes)" for r in op.regions]
        for u in getattr(self.report, "unclaimed", ()):
            lines.append(f"  op {u.name!r} ({u.op}) is left to the caller: {u.message}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Plan(graph={self.graph.name!r}, target={self.target!r}, engine={self.engine!r}, " \
               f"kernels={len(self.kernels)}, workspace_size={self.workspace_size})"
