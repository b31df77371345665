"""probe(graph, target): the side-effect-free support check. Pure Python over the graph and the capability tables
(no torch, no cutlass): unsupported is an answer, only a malformed graph raises."""

from __future__ import annotations

from typing import TYPE_CHECKING

from frost.analyzer.analysis import Matched, analyze
from frost.analyzer.capability import ENGINES, Capability, engine_names, tables_for
from frost.analyzer.declines import Reason, declines
from frost.analyzer.facts import Facts
from frost.analyzer.report import OpSupport, SupportReport
from frost.analyzer.targets import normalise_target
from frost.errors import EngineError

if TYPE_CHECKING:
    from frost.ir import Graph


def engines_named(engine: str | None) -> tuple[Capability, ...]:
    """The candidates of a support question: every engine's tables in preference order (None: "can frost run it
    at all?"), or the named engine's (e.g. "cute_sm120": "does a GPU kernel serve it?"). Raises EngineError for
    an unknown name."""
    if engine is None:
        return ENGINES
    named = tuple(cap for cap in ENGINES if cap.engine == engine)
    if named:
        return named
    raise EngineError(engine, " or ".join(repr(name) for name in engine_names()) + " or None (every engine)")


def choose(facts: Facts, target: str, engines: tuple[Capability, ...] = ENGINES
           ) -> tuple[Capability | None, dict[str, tuple[Reason, ...]]]:
    """The first engine (in preference order) that serves `facts` on a normalised `target`, as its table for the
    op's kind, and every engine's reasons for declining (all engines are asked, so the report is complete)."""
    tables = tables_for(facts.op, engines)
    declined = {cap.engine: tuple(rs) for cap in tables if (rs := declines(cap, facts, target))}
    chosen = next((cap for cap in tables if cap.engine not in declined), None)
    return chosen, declined


def _op_support(m: Matched, target: str, engines: tuple[Capability, ...]) -> OpSupport:
    chosen, declined = choose(m.facts, target, engines)
    return OpSupport(name=m.name, pattern=m.pattern.label, engine=chosen.engine if chosen else None,
                     declined=declined, facts=m.facts)


def probe(graph: Graph, target: str, engines: tuple[Capability, ...] = ENGINES) -> SupportReport:
    """Can frost serve `graph` on `target` ("cpu", "cuda", "sm_90", "sm_120a", ...)? `engines` pins or reorders
    the candidates (e.g. (CUTE_SM120,) to ask about the kernels alone). Raises TargetError for an unknown target
    and GraphError for a malformed graph; never for an unsupported one."""
    target = normalise_target(target)
    analysis = analyze(graph)
    ops = tuple(_op_support(m, target, engines) for m in analysis.matched)
    return SupportReport(target=target, supported=bool(ops) and all(op.engine for op in ops), ops=ops,
                         unclaimed=analysis.unclaimed, asked=engine_names(engines))
