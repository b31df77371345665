"""check_support(graph, target=None): the public support check (exported as frost.check_support)."""

from __future__ import annotations

from frost.analyzer import SupportReport, probe
from frost.analyzer.probe import engines_named
from frost.ir import Graph


def check_support(graph: Graph, target: str | None = None, *, engine: str | None = None) -> SupportReport:
    """Which engine would serve each attention op of `graph` on `target`, and every reason the others decline.

    target None asks about this machine (detect_target(): "cpu" when there is no CUDA device). engine None asks
    every engine, as frost.compile does ("can frost run it?": the reference engine serves nearly everything);
    engine="cute_sm120" asks whether a GPU kernel serves it, and report.supported answers that alone.
    Unsupported is an answer (report.supported is False), not an exception; a malformed graph raises GraphError,
    an unknown target string TargetError, an unknown engine name EngineError, a graph argument that is no
    frost.Graph ArgumentTypeError."""
    from frost.api.plans import check_graph_argument

    check_graph_argument(graph)
    engines = engines_named(engine)
    if target is None:
        from frost.api.plans import detect_target

        target = detect_target()
    return probe(graph, target, engines)
