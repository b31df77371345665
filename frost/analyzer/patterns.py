"""Patterns: what frost claims in a graph, as data. A Pattern names an op kind, the input roles it needs and may
take, the output roles it may emit, a small predicate, and how to describe a match as Facts. Claiming a new kind
of subgraph is a new entry in PATTERNS, not a new branch in the matcher."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from frost.analyzer.extract import facts_for
from frost.analyzer.facts import Facts
from frost.analyzer.netgraph import op_node

if TYPE_CHECKING:
    import networkx as nx

    from frost.ir import Graph


@dataclass(frozen=True)
class Binding:
    """One op node's wiring as seen in the dataflow graph: role -> tensor name."""

    op: str
    reads: dict[str, str]
    writes: dict[str, str]


def bind(g: nx.DiGraph, op_name: str) -> Binding:
    node = op_node(op_name)
    reads = {r: t[1] for t, edge in g.pred[node].items() for r in edge["roles"]}
    writes = {r: t[1] for t, edge in g.succ[node].items() for r in edge["roles"]}
    return Binding(op_name, reads, writes)


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


def _dsink_iff_sink(b: Binding) -> Optional[str]:
    if ("sink" in b.reads) != ("dsink" in b.writes):
        return "a dsink output is emitted exactly when a sink input is read"
    return None


SDPA_BACKWARD = Pattern(op="sdpa_backward", needs=("q", "k", "v", "o", "do", "lse"),
                        may=("sink", "dlse", "seq_len_q", "seq_len_kv", "cu_seqlens_q", "cu_seqlens_kv"),
                        emits=("dq", "dk", "dv", "dsink"),
                        where=_dsink_iff_sink)

SDPA_FORWARD = Pattern(op="sdpa_forward", needs=("q", "k", "v"),
                       may=("sink", "seq_len_q", "seq_len_kv", "cu_seqlens_q", "cu_seqlens_kv"), emits=("o", "lse"))

PATTERNS: tuple[Pattern, ...] = (SDPA_BACKWARD, SDPA_FORWARD)


def patterns_for(op_kind: str, patterns: tuple[Pattern, ...] = PATTERNS) -> list[Pattern]:
    return [p for p in patterns if p.op == op_kind]
