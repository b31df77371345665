"""A kernel call's optional tensors (per-batch lengths, a sink and its dsink, dlse) by frost.spec role: which ones
a direct call may pass, the runtime flags that say which pointers are valid, and the pointers in the order the
kernels take them (spec.kernel_optional). The launchers name none of them, so a new optional input is a spec row
and the kernel code that reads it."""

from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping

from frost import spec

NONE: Mapping[str, object] = MappingProxyType({})
SLOTS: dict[spec.Kind, tuple[str, ...]] = {kind: tuple(t.role for t in spec.kernel_optional(kind))
                                           for kind in ("forward", "backward")}
OUTPUTS: dict[spec.Kind, tuple[str, ...]] = {kind: tuple(t.role for t in spec.kernel_optional(kind)
                                                         if kind in t.writes) for kind in ("forward", "backward")}
_FLAG = {t.role: t.kernel_flag for t in spec.TENSORS if t.optional}
_SLOT = {kind: {role: i for i, role in enumerate(roles)} for kind, roles in SLOTS.items()}


def given(kind: spec.Kind, values: Mapping[str, object], entry: str) -> Mapping[str, object]:
    """The optional tensors a direct call of ``entry`` passed as keywords (None: not given), by role; a TypeError
    for a keyword that is none of an op of ``kind``'s."""
    unknown = [name for name in values if name not in SLOTS[kind]]
    if unknown:
        raise TypeError(f"{entry}: got an unexpected keyword argument {unknown[0]!r}; accepted optional tensors: "
                        f"{', '.join(SLOTS[kind])}")
    return {role: x for role, x in values.items() if x is not None}


def flags(roles: Iterable[str]) -> int:
    """The runtime flag bits of the optional tensors given (their pointers are valid)."""
    bits = 0
    for role in roles:
        bits |= _FLAG[role]
    return bits


def pointers(kind: spec.Kind, optional: Mapping[str, object], stand_in: int) -> tuple[int, ...]:
    """The optional tensors' addresses in the kernels' order; ``stand_in`` for one not given (never dereferenced:
    its flag is off)."""
    return flags_and_pointers(kind, optional, stand_in)[1]


def flags_and_pointers(kind: spec.Kind, optional: Mapping[str, object], stand_in: int) -> tuple[int, tuple[int, ...]]:
    """flags(optional) and pointers(kind, optional, stand_in) in one pass over the tensors given (a launch's hot
    path)."""
    slot = _SLOT[kind]
    addresses = [stand_in] * len(slot)
    bits = 0
    for role, x in optional.items():
        addresses[slot[role]] = x.data_ptr()  # type: ignore[attr-defined]
        bits |= _FLAG[role]
    return bits, tuple(addresses)
