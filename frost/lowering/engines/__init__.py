"""Engines as small adapters: each turns (graph, op, Facts, target) into a Lowering. Which engine serves an op is
the probe's decision (frost.analyzer); these only carry it out, and lower_graph makes the plan of a graph from them:
each op's lowering, and every op's workspace requests packed into one 256-byte-aligned layout."""

from __future__ import annotations

from collections.abc import Sequence

from frost.analyzer.probe import OpSupport
from frost.lowering.engines.cute_sm120 import CuteSm120Engine
from frost.lowering.engines.reference import ReferenceEngine
from frost.lowering.plan import OpPlan, Plan
from frost.lowering.workspace import Region, pack

ADAPTERS = {"reference": ReferenceEngine(), "cute_sm120": CuteSm120Engine()}


def adapter(engine: str):
    return ADAPTERS[engine]


def lower_graph(graph, target: str, choices: Sequence[tuple[OpSupport, str]], report=None) -> Plan:
    """`choices` pairs each claimed op's OpSupport (name, facts) with the engine that will serve it. The plan runs
    the ops in dataflow order (a forward before the backward that reads its o and lse)."""
    ops = {op.name: op for op in graph.sdpa_ops()}
    position = {name: i for i, name in enumerate(graph.dataflow_order())}
    choices = sorted(choices, key=lambda choice: position[choice[0].name])
    lowered = [(s, engine, adapter(engine).lower(graph, ops[s.name], s.facts, target)) for s, engine in choices]
    layout = pack([(f"{s.name}/{name}", nbytes) for s, _, low in lowered for name, nbytes in low.workspace])
    plans = []
    for s, engine, low in lowered:
        prefix = f"{s.name}/"
        regions = tuple(Region(r.name[len(prefix):], r.offset, r.nbytes) for r in layout.regions
                        if r.name.startswith(prefix))
        plans.append(OpPlan(s.name, engine, s.facts, low, regions))
    return Plan(graph=graph, target=target, ops=tuple(plans), workspace=layout, report=report)


__all__ = ["ADAPTERS", "adapter", "lower_graph", "CuteSm120Engine", "ReferenceEngine"]
