"""The argument gate in front of every public call: each argument's type first (tensor, int, float, bool, str or
None; bools strict), then its value, each failure a TensorError (an ArgumentTypeError for a wrong type) that names
the argument as the caller spelled it. What each option accepts is declared once, in frost.spec.OPTIONS.

The gate is pure host work on a handful of Python values, so it runs on every call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

import torch

from frost import spec
from frost.errors import ArgumentTypeError, TensorError

Bound = Optional[int]


@dataclass(frozen=True)
class Options:
    """A call's options after the gate: the scale as given (None: the default), the band bounds as given (causal
    folds in later, at spec.Mask), and the backward's mode (None: torch's flag when the backward runs)."""

    softmax_scale: Optional[float]
    causal: bool
    left: Bound
    right: Bound
    alignment: spec.Alignment
    deterministic: Optional[bool] = None

    def mask(self) -> tuple[Optional[float], bool, Bound, Bound, spec.Alignment]:
        """The part of the options that describes the math (a plan key holds it)."""
        return (self.softmax_scale, self.causal, self.left, self.right, self.alignment)


def tensor(name: str, value: Any, optional: bool = False) -> Optional[torch.Tensor]:
    """A torch.Tensor (or None where ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, torch.Tensor):
        raise ArgumentTypeError(name, type(value).__name__, "None or a torch.Tensor" if optional else "a torch.Tensor")
    return value


# (role, packed) -> (the caller's name, optional), read off frost.spec once
_NAMED = {(t.role, packed): (t.name(packed), t.optional) for t in spec.TENSORS for packed in (False, True)}


def tensors(values: Mapping[str, object], packed: bool) -> dict[str, torch.Tensor]:
    """The call's tensors by IR role, each checked by tensor() under its caller name; absent optional ones left
    out."""
    checked: dict[str, torch.Tensor] = {}
    for role, value in values.items():
        name, optional = _NAMED[role, packed]
        t = tensor(name, value, optional)
        if t is not None:
            checked[role] = t
    return checked


def strict_bool(name: str, value: Any) -> bool:
    """True or False only: a truthy string such as "yes", a 1 or a numpy bool is a mistake, not a request."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(name, value, "True or False")
    return value


def optional_bool(name: str, value: Any) -> Optional[bool]:
    if value is not None and not isinstance(value, bool):
        raise ArgumentTypeError(name, value, spec.OPTION[name].accepted)
    return value


def scale(value: Any) -> Optional[float]:
    """softmax_scale: None or a finite real > 0 (a Python or numpy float or int; never a bool or a tensor, whose
    value would have to be read back)."""
    if value is None:
        return None
    if not spec.valid_scale(value):
        error = TensorError if isinstance(value, (int, float)) and not isinstance(value, bool) else ArgumentTypeError
        raise error("softmax_scale", value, spec.OPTION["softmax_scale"].accepted)
    return float(value)


def alignment(value: Any) -> spec.Alignment:
    if not isinstance(value, str):
        raise ArgumentTypeError("causal_alignment", value, spec.OPTION["causal_alignment"].accepted)
    if value not in spec.ALIGNMENTS:
        raise TensorError("causal_alignment", value, spec.OPTION["causal_alignment"].accepted)
    return value


def window(value: Any) -> tuple[Bound, Bound]:
    """FlashAttention's window_size: a pair (left, right) of None or ints; a negative int means unbounded."""
    accepted = spec.OPTION["window_size"].accepted
    if not isinstance(value, (tuple, list)):
        raise ArgumentTypeError("window_size", value, accepted)
    if len(value) != 2:
        raise TensorError("window_size", value, accepted)
    return _bound(value[0], value), _bound(value[1], value)


def _bound(x: Any, window_size: Any) -> Bound:
    if x is None:
        return None
    n = spec.as_int(x)
    if n is None:
        raise ArgumentTypeError("window_size", window_size, spec.OPTION["window_size"].accepted)
    return None if n < 0 else n


def host_int(name: str, value: Any) -> int:
    """A host int >= 0 (a Python or numpy integer; never a bool, a float or a tensor, which would be read back). A
    symbolic int of a torch.compile trace passes as it is (checked when the op runs)."""
    if isinstance(value, torch.SymInt):
        return value   # type: ignore[return-value]
    accepted = spec.OPTION[name].accepted
    n = spec.as_int(value)
    if n is None:
        raise ArgumentTypeError(name, value, accepted)
    if n < 0:
        raise TensorError(name, n, accepted)
    return n


def options(softmax_scale: Any, causal: Any, window_size: Any, causal_alignment: Any,
            deterministic: Any = None) -> Options:
    """Every option of an attention call, through the gate."""
    left, right = window(window_size)
    return Options(scale(softmax_scale), strict_bool("causal", causal), left, right, alignment(causal_alignment),
                   optional_bool("deterministic", deterministic))


def resolve_deterministic(deterministic: Optional[bool]) -> bool:
    """A bool as given; None follows torch.use_deterministic_algorithms (a set flag is honoured, never ignored)."""
    if deterministic is None:
        return torch.are_deterministic_algorithms_enabled()
    return optional_bool("deterministic", deterministic) or False


__all__ = ["Options", "alignment", "host_int", "optional_bool", "options", "resolve_deterministic", "scale",
           "strict_bool", "tensor", "tensors", "window"]
