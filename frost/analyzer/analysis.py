"""analyze(graph): claim the ops a pattern fits, describe each as Facts, and say why every other op is left alone.

The result depends only on the (frozen) graph, never on the target, so it is memoised per graph object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from frost.analyzer.facts import Facts
from frost.analyzer.memo import per_graph
from frost.analyzer.netgraph import to_networkx
from frost.analyzer.patterns import PATTERNS, Binding, Pattern, bind, patterns_for

if TYPE_CHECKING:
    import networkx as nx

    from frost.ir import Graph
    from frost.ir.ops import Op


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
