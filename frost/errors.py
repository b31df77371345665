"""Typed errors. Every message names the offending tensor/attribute, the value, and what would be accepted."""

from __future__ import annotations


class FrostError(Exception):
    """Base of every error frost raises on purpose."""


def _fmt(subject: str, value: object, accepted: str, detail: str = "") -> str:
    msg = f"{subject}: got {value!r}; accepted: {accepted}"
    return f"{msg} ({detail})" if detail else msg


class GraphError(FrostError):
    """A graph that is malformed: raised when it is built or loaded, never later.

    Deliberately not a ValueError: pydantic would swallow it into a ValidationError.
    """

    def __init__(self, subject: str, value: object, accepted: str, detail: str = "") -> None:
        self.subject, self.value, self.accepted = subject, value, accepted
        super().__init__(_fmt(subject, value, accepted, detail))


class TensorError(FrostError, ValueError):
    """A runtime tensor that does not match the plan it is bound to (dtype, device, shape, strides, values)."""

    def __init__(self, subject: str, value: object, accepted: str, detail: str = "") -> None:
        self.subject, self.value, self.accepted = subject, value, accepted
        super().__init__(_fmt(subject, value, accepted, detail))


class NotSupported(FrostError):
    """A well-formed graph that the requested engine cannot serve; `.report` holds every reason."""

    def __init__(self, message: str, report: object = None) -> None:
        self.report = report
        super().__init__(message)
