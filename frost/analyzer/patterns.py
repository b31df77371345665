"""Patterns: what frost claims in a graph, as data. A Pattern names an op kind, the input roles it needs and may
take, the output roles it may emit, a small predicate, and how to describe a match as Facts. Claiming a new kind
of subgraph is a new entry in PATTERNS, not a new branch in the matcher."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from frost import spec
from frost.analyzer.facts import Facts, facts_for

if TYPE_CHECKING:
    from frost.analyzer.analysis import Binding
    from frost.ir import Graph


def _fits_always(_: Binding) -> Optional[str]:
    return None


@dataclass(frozen=True)
class Pattern:
    op: str                                   # op kind this pattern claims
    needs: tuple[str, ...]                    # input roles that must be bound
    may: tuple[str, ...] = ()                 # input roles that may be bound
    emits: tuple[str, ...] = ()               # output roles it may write
    where: Callable[[Binding], Optional[str]] = _fits_always   # None = fits, else why not
    describe: Callable[[Graph, Any], Facts] = facts_for   # (graph, the claimed op) -> Facts
    name: str = field(default="")

    @property
    def label(self) -> str:
        return self.name or self.op

    def mismatch(self, b: Binding) -> Optional[str]:
        """Why `b` does not fit this pattern, or None when it does."""
        missing = [r for r in self.needs if r not in b.reads]
        unknown = sorted(set(b.reads) - set(self.needs) - set(self.may))
        stray = sorted(set(b.writes) - set(self.emits))
        problems = [f"{what} {roles}" for what, roles in (("missing input roles", missing),
                    ("unexpected input roles", unknown), ("unexpected output roles", stray)) if roles]
        return "; ".join(problems) or self.where(b)


def _gradients_iff_inputs(b: Binding) -> Optional[str]:
    """An optional input's gradient output (frost.spec: dsink of sink) is emitted exactly when the input is read."""
    for grad in spec.outputs("backward"):
        if grad.optional and grad.grad_of is not None and (grad.grad_of in b.reads) != (grad.role in b.writes):
            return f"a {grad.role} output is emitted exactly when a {grad.grad_of} input is read"
    return None


def _pattern(kind: spec.Kind, where: Callable[[Binding], Optional[str]] = _fits_always) -> Pattern:
    """The pattern of an attention op kind, read off frost.spec: its required and optional inputs, its outputs."""
    ins = spec.inputs(kind, packed=False)   # a packed op adds the offsets (may)
    return Pattern(op=f"sdpa_{kind}", needs=spec.role_names(ins, optional=False),
                   may=spec.role_names(ins, optional=True) + spec.OFFSETS, emits=spec.role_names(spec.outputs(kind)),
                   where=where)


SDPA_BACKWARD = _pattern("backward", where=_gradients_iff_inputs)
SDPA_FORWARD = _pattern("forward")

PATTERNS: tuple[Pattern, ...] = (SDPA_BACKWARD, SDPA_FORWARD)


def patterns_for(op_kind: str, patterns: tuple[Pattern, ...] = PATTERNS) -> list[Pattern]:
    return [p for p in patterns if p.op == op_kind]
