"""Engines as small adapters: each turns (graph, op, Facts, target) into a Lowering. Which engine serves an op is
the probe's decision (frost.analyzer); these only carry it out."""

from __future__ import annotations

from frost.lowering.engines.cute_sm120 import CuteSm120Engine
from frost.lowering.engines.reference import ReferenceEngine

ADAPTERS = {"reference": ReferenceEngine(), "cute_sm120": CuteSm120Engine()}


def adapter(engine: str):
    return ADAPTERS[engine]


__all__ = ["ADAPTERS", "adapter", "CuteSm120Engine", "ReferenceEngine"]
