"""Typed errors. Every message names the offending tensor/attribute, the value, and what would be accepted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # the report's type only: errors.py imports nothing of frost at run time
    from frost.analyzer.probe import SupportReport


class FrostError(Exception):
    """Base of every error frost raises on purpose. Its subclasses set their message with ``self.args = (message,)``
    rather than through ``super().__init__``: torch.compile traces the former, so an error raised in compiled code
    shows up in torch's report with its arguments, where the latter stopped the trace with an unrelated message.

    An error pickles as its message and attributes, not as a constructor call: it crosses a process boundary
    (multiprocessing, a distributed launcher's error file) as itself, where the default pickling called the
    subclass's constructor with the message alone and failed on the other side."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.args, dict(self.__dict__))


def _rebuild(cls: type[FrostError], args: tuple[Any, ...], state: dict[str, Any]) -> FrostError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


SHOWN_CHARS = 100   # a value's repr past this is cut (a whole file, a 400-digit int, a long lengths list)


def _shown(value: object) -> str:
    """``repr(value)``, cut to SHOWN_CHARS with the full length said, so that a message stays one readable line."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


def _fmt(subject: str, value: object, accepted: str, detail: str = "") -> str:
    msg = f"{subject}: got {_shown(value)}; accepted: {accepted}"
    return f"{msg} ({detail})" if detail else msg


class GraphError(FrostError):
    """A graph that is malformed: raised when it is built or loaded, never later.

    Deliberately not a ValueError: pydantic would swallow it into a ValidationError.
    """

    def __init__(self, subject: str, value: object, accepted: str, detail: str = "") -> None:
        self.subject, self.value, self.accepted, self.detail = subject, value, accepted, detail
        self.args = (_fmt(subject, value, accepted, detail),)


class UnknownOp(GraphError):
    """An op of a graph that names a kind frost does not know where it meant one it does (a misspelt
    "sdpa_backward", or the named inputs of a structured op under another kind)."""

    def __init__(self, value: object, known: tuple[str, ...], detail: str = "") -> None:
        super().__init__("op", value, ", ".join(known), detail)
        message = f"unknown op {value!r}; known: {', '.join(known)}"
        self.args = (f"{message} ({detail})" if detail else message,)


class TensorError(FrostError, ValueError):
    """A call's tensor or argument that frost cannot accept (dtype, device, shape, strides, values, options), or a
    runtime tensor that does not match the plan it is bound to."""

    def __init__(self, subject: str, value: object, accepted: str, detail: str = "") -> None:
        self.subject, self.value, self.accepted, self.detail = subject, value, accepted, detail
        self.args = (_fmt(subject, value, accepted, detail),)


class ArgumentTypeError(TensorError, TypeError):
    """An argument of the wrong type (a list where a tensor goes, a string where a bool goes): a TensorError that
    is also a TypeError, so either ``except`` catches it."""


class EngineError(FrostError, ValueError):
    """An engine name that names no engine (a caller mistake, not an unsupported graph)."""

    def __init__(self, value: object, accepted: str) -> None:
        self.value, self.accepted = value, accepted
        self.args = (_fmt("engine", value, accepted),)


class TargetError(FrostError, ValueError):
    """A target string that names no known device kind (a caller mistake, not an unsupported graph)."""

    def __init__(self, value: object, accepted: str) -> None:
        self.value, self.accepted = value, accepted
        self.args = (_fmt("target", value, accepted),)


class SettingError(FrostError, ValueError):
    """A FROST_* environment variable set to a value frost does not read (a misspelt switch would otherwise keep
    its default without a word)."""

    def __init__(self, variable: str, value: object, accepted: str) -> None:
        self.variable, self.value, self.accepted = variable, value, accepted
        self.args = (_fmt(variable, value, accepted),)


class NotSupported(FrostError):
    """A well-formed graph that the requested engine cannot serve; `.report` holds every reason."""

    def __init__(self, message: str, report: SupportReport | None = None) -> None:
        self.report = report
        self.args = (message,)
