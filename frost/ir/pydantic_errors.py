"""Turn pydantic's structural ValidationError into frost's GraphError, so one exception type covers every
malformed graph whether it came from JSON or from the builder."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import ValidationError

from frost.errors import GraphError


@contextmanager
def as_graph_errors(subject: str) -> Iterator[None]:
    try:
        yield
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise GraphError(f"{subject} at {where}" if where else subject, first.get("input"), first["msg"]) from exc
