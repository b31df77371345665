"""The graph: tensors plus ops. Validated whenever it is constructed, including from JSON."""

from __future__ import annotations

import weakref
from functools import partial, wraps
from typing import Any, Callable, TypeVar

from pydantic import BaseModel, ConfigDict, model_validator

from frost.errors import GraphError
from frost.ir.pydantic_errors import as_graph_errors
from frost.ir.ops import AttentionOp, GenericOp, Op, SdpaBackwardOp, SdpaForwardOp, SdpaOp
from frost.ir.tensors import TensorSpec, check_tensor
from frost.ir.validate import check_ragged_references, check_sdpa_backward, check_sdpa_forward


class Graph(BaseModel):
    """An attention graph (forward and/or backward ops, and generic ops frost leaves to the caller). `model_dump_json` / `from_json` round-trip it exactly; frost.compile(graph)
    turns it into a plan (the IR imports nothing above it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "graph"
    tensors: tuple[TensorSpec, ...]
    ops: tuple[Op, ...]

    @model_validator(mode="after")
    def _consistent(self) -> "Graph":
        check_graph(self)
        return self

    def tensor(self, name: str) -> TensorSpec:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def tensor_map(self) -> dict[str, TensorSpec]:
        return {t.name: t for t in self.tensors}

    def sdpa_ops(self) -> list[AttentionOp]:
        """The attention ops (sdpa_forward and sdpa_backward), in graph order."""
        return [op for op in self.ops if isinstance(op, SdpaOp)]

    def dataflow_order(self) -> list[str]:
        """Op names in an order where every op comes after the ops that write its inputs (graph order where the
        dataflow leaves a choice)."""
        return _dataflow_order(self, _producers(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> "Graph":
        """Parse JSON; structural problems (wrong types, missing fields) also raise GraphError."""
        with as_graph_errors("graph JSON"):
            return cls.model_validate_json(text)


def check_graph(graph: Graph) -> None:
    tensors: dict[str, TensorSpec] = {}
    for t in graph.tensors:
        if t.name in tensors:
            raise GraphError("tensor name", t.name, "unique tensor names")
        check_tensor(t)
        tensors[t.name] = t
    check_ragged_references(tensors)
    produced: dict[str, str] = {}
    op_names: set[str] = set()
    for op in graph.ops:
        if op.name in op_names:
            raise GraphError("op name", op.name, "unique op names")
        op_names.add(op.name)
        for name in op.input_names() + op.output_names():
            if name not in tensors:
                raise GraphError(f"{op.op} {op.name!r} tensor reference", name,
                                 f"a declared tensor ({', '.join(sorted(tensors)) or 'none declared'})")
        clash = set(op.input_names()) & set(op.output_names())
        if clash:
            raise GraphError(f"{op.op} {op.name!r} outputs", sorted(clash), "outputs distinct from the op's inputs")
        for name in op.output_names():
            if name in produced:
                raise GraphError(f"tensor {name!r}", f"written by {produced[name]!r} and {op.name!r}",
                                 "each tensor written by at most one op")
            produced[name] = op.name
        if isinstance(op, SdpaBackwardOp):
            check_sdpa_backward(op, tensors)
        elif isinstance(op, SdpaForwardOp):
            check_sdpa_forward(op, tensors)
    if len(graph.ops) > 1:
        _dataflow_order(graph, produced)


def _producers(graph: Graph) -> dict[str, str]:
    return {name: op.name for op in graph.ops for name in op.output_names()}


def _dataflow_order(graph: Graph, produced: dict[str, str]) -> list[str]:
    """Kahn's algorithm, taking the earliest listed ready op each step; a dataflow cycle (an op that depends,
    through other ops, on its own output) is a GraphError."""
    deps = {op.name: {produced[t] for t in op.input_names() if t in produced} for op in graph.ops}
    order: list[str] = []
    done: set[str] = set()
    while len(order) < len(deps):
        ready = next((name for name, d in deps.items() if not d and name not in done), None)
        if ready is None:
            stuck = sorted(name for name, d in deps.items() if d)
            raise GraphError("graph dataflow", stuck, "an acyclic graph (no op may depend on its own output)")
        order.append(ready)
        done.add(ready)
        for d in deps.values():
            d.discard(ready)
    return order


G = TypeVar("G")
T = TypeVar("T")


def per_graph(fn: Callable[[G], T]) -> Callable[[G], T]:
    """Memoise a function of one graph by object identity. A Graph is frozen, so what is derived from it never
    changes; repeated questions about the same graph object (a training loop asking every step) pay a dict lookup.
    Identity, not equality: hashing a graph would cost more than analysing it. Entries leave with their graph."""
    cache: dict[int, tuple[weakref.ref[Any], T]] = {}

    @wraps(fn)
    def cached(graph: G) -> T:
        key = id(graph)
        hit = cache.get(key)
        if hit is not None and hit[0]() is graph:
            return hit[1]
        value = fn(graph)
        cache[key] = (weakref.ref(graph, partial(_drop, key)), value)
        return value

    def _drop(key: int, ref: weakref.ref[Any]) -> None:
        hit = cache.get(key)
        if hit is not None and hit[0] is ref:
            del cache[key]

    cached.cache_clear = cache.clear  # type: ignore[attr-defined]
    cached.cache_size = cache.__len__  # type: ignore[attr-defined]
    cached.uncached = fn  # type: ignore[attr-defined]
    return cached


__all__ = ["Graph", "GenericOp", "SdpaBackwardOp", "SdpaForwardOp", "check_graph", "per_graph"]
