"""analyze(graph): the graph's dataflow as a networkx DiGraph, each op claimed by the pattern that fits it and
described as Facts, and why every other op is left alone.

The DiGraph has a node per tensor ("tensor", name) and per op ("op", name), edges tensor -> op (a read) and op ->
tensor (a write), each labelled with the roles the tensor plays for the op ("q", "lse", "dq", or a position for
generic ops; a tuple, because one tensor may fill several roles, e.g. q and k in self-attention with shared
projections). Patterns match against this view, so they see the dataflow, not the IR's Python classes. The result
depends only on the (frozen) graph, never on the target, so it is memoised per graph object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from pydantic import BaseModel, ConfigDict

from frost.analyzer.facts import Facts
from frost.analyzer.patterns import PATTERNS, Pattern, patterns_for
from frost.ir.graph import per_graph

if TYPE_CHECKING:
    import networkx as nx

    from frost.ir import Graph
    from frost.ir.ops import Op

TENSOR, OP = "tensor", "op"   # node keys carry their kind; the IR objects stay in the Graph (no copies here)
Node = tuple[str, str]
Edge = tuple[Node, Node, dict[str, tuple[str, ...]]]   # (from, to, {"roles": roles})


def op_node(name: str) -> tuple[str, str]:
    """Node key of an op (tensors and ops live in separate namespaces: a tensor may share an op's name)."""
    return (OP, name)


def tensor_node(name: str) -> tuple[str, str]:
    return (TENSOR, name)


def _roles(ports: Union[BaseModel, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """tensor -> its roles: named fields of a ports model, or positions of a plain tuple."""
    pairs = ports.__dict__.items() if isinstance(ports, BaseModel) else ((str(i), n) for i, n in enumerate(ports))
    out: dict[str, tuple[str, ...]] = {}
    for role, name in pairs:
        if name is not None:
            out[name] = out.get(name, ()) + (role,)
    return out


def _edges(op: Op) -> tuple[Edge, ...]:
    node = op_node(op.name)
    reads = ((tensor_node(t), node, {"roles": r}) for t, r in _roles(op.inputs).items())
    writes = ((node, tensor_node(t), {"roles": r}) for t, r in _roles(op.outputs).items())
    return (*reads, *writes)


@per_graph
def to_networkx(graph: Graph) -> nx.DiGraph:
    """The dataflow DiGraph of `graph` (memoised per graph object; treat it as read-only).

    The IR has already rejected dataflow cycles, so the result is a DAG."""
    import networkx as nx  # lazily: `import frost` stays light

    g = nx.DiGraph(name=graph.name)
    g.add_edges_from(edge for op in graph.ops for edge in _edges(op))   # creates every wired node
    g.add_nodes_from(n for n in map(tensor_node, (t.name for t in graph.tensors)) if n not in g)  # unused tensors
    return g


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


class Unclaimed(BaseModel):
    """An op frost leaves to the caller; `code` is "no_pattern" (frost serves no op of this kind) or
    "pattern_mismatch" (a pattern for this kind exists but the op's wiring does not fit it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    op: str
    code: str
    message: str


@dataclass(frozen=True)
class Matched:
    """A claimed op: the pattern that fits it, its wiring, and its Facts."""

    name: str
    pattern: Pattern
    binding: Binding
    facts: Facts


@dataclass(frozen=True)
class Analysis:
    matched: tuple[Matched, ...]
    unclaimed: tuple[Unclaimed, ...]


def _claim(graph: Graph, g: nx.DiGraph, op: Op, patterns: tuple[Pattern, ...]) -> Matched | Unclaimed:
    candidates = patterns_for(op.op, patterns)
    if not candidates:
        served = ", ".join(sorted({p.op for p in patterns}))
        return Unclaimed(name=op.name, op=op.op, code="no_pattern",
                         message=f"op kind {op.op!r} is not served by frost (it serves: {served}); left to the caller")
    binding = bind(g, op.name)
    why: list[str] = []
    for pattern in candidates:
        problem = pattern.mismatch(binding)
        if problem is None:
            return Matched(op.name, pattern, binding, pattern.describe(graph, op))
        why.append(f"{pattern.label}: {problem}")
    return Unclaimed(name=op.name, op=op.op, code="pattern_mismatch", message="; ".join(why))


def analyze_with(graph: Graph, patterns: tuple[Pattern, ...]) -> Analysis:
    """analyze() against an explicit pattern set (not memoised; for tests and experiments)."""
    g = to_networkx(graph)
    results = [_claim(graph, g, op, patterns) for op in graph.ops]
    return Analysis(matched=tuple(r for r in results if isinstance(r, Matched)),
                    unclaimed=tuple(r for r in results if isinstance(r, Unclaimed)))


@per_graph
def analyze(graph: Graph) -> Analysis:
    """Matched ops with their Facts, plus the ops frost does not claim and why. Raises GraphError only for a
    malformed graph (a dataflow cycle); everything else is an answer."""
    return analyze_with(graph, PATTERNS)
