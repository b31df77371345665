"""Graph -> networkx DiGraph: a node per tensor ("tensor", name) and per op ("op", name), edges tensor -> op
(a read) and op -> tensor (a write), each labelled with the roles the tensor plays for the op ("q", "lse", "dq",
or a position for generic ops; a tuple, because one tensor may fill several roles, e.g. q and k in
self-attention with shared projections).

Patterns match against this view, so they see the dataflow, not the IR's Python classes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from pydantic import BaseModel

from frost.analyzer.memo import per_graph

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
