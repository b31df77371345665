"""Value checks of small device tensors (padding lengths, packed offsets) that never stall the host.

When a call is launched, the values are copied to pinned host memory on the call's stream (an asynchronous copy)
and an event is recorded after the copy. A later call (or the same one, if the copy has already landed) finds the
event complete and checks the copied values on the host, with the same rules and messages as the synchronous check:
a bad value is raised within a few calls, naming the argument and the first bad index, while the CPU runs ahead of
the GPU. The kernels clamp lengths and segments either way, so nothing reads or writes out of bounds meanwhile.

Each tensor is copied once per version: the attention calls of a training step that share one lengths tensor (every
layer, forward and backward) copy and check it once. A tensor is recognised by a weak reference to the very object
and its version counter, so a new tensor that reuses a freed one's memory is always checked."""

from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable, Hashable, Optional

import torch

from frost.errors import TensorError

MAX_PENDING = 64   # copies in flight; beyond this the oldest is waited for (a GPU far behind the host)
Check = Callable[[tuple], None]


@dataclass
class _Pending:
    event: object                         # a torch.cuda.Event recorded after the copies
    host: tuple                           # the pinned copies (None where a tensor was not given)
    check: Check


class DeferredChecks:
    """submit() a call's tensors with their host-side check; landed() runs the checks whose copies have arrived."""

    def __init__(self, remember: int = 32) -> None:
        self._pending: deque[_Pending] = deque()
        # (limits, the tensors' ids) -> (weak refs, versions) of the last `remember` submissions, oldest first
        self._seen: OrderedDict[tuple, tuple] = OrderedDict()
        self._remember = remember

    def submit(self, tensors: tuple[Optional[torch.Tensor], ...], limits: Hashable, check: Check) -> None:
        """Copy ``tensors`` (device tensors, or None) to the host and check them with ``check(host copies)`` once
        the copies land; raises what an earlier submission found, if its copy has landed."""
        self.landed()
        key = _key(tensors, limits)
        if self._already(key, tensors):
            return
        if len(self._pending) >= MAX_PENDING:
            self._pending[0].event.synchronize()   # type: ignore[attr-defined]
            self.landed()
        device = next(t.device for t in tensors if t is not None)
        host = tuple(None if t is None else _pinned_copy(t) for t in tensors)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        self._pending.append(_Pending(event, host, check))
        self._seen[key] = (tuple(None if t is None else weakref.ref(t) for t in tensors),
                           tuple(_version(t) for t in tensors))
        self._seen.move_to_end(key)
        if len(self._seen) > self._remember:
            self._seen.popitem(last=False)

    def landed(self, wait: bool = False) -> None:
        """Check every submission whose copies have landed (``wait``: all of them, synchronising); a bad value
        raises a TensorError that says it was found in an earlier call."""
        while self._pending and (wait or self._pending[0].event.query()):   # type: ignore[attr-defined]
            pending = self._pending.popleft()
            if wait:
                pending.event.synchronize()   # type: ignore[attr-defined]
            try:
                pending.check(pending.host)
            except TensorError as exc:
                error = TensorError(exc.subject, exc.value, exc.accepted,  # type: ignore[attr-defined]
                                    "found in a call made before this one: the values are checked on the host "
                                    "after an asynchronous copy, and the kernels clamped them meanwhile")
                error.earlier_call = True   # its names are that call's (frost.lowering.executor.in_graph_terms)
                raise error from None

    def _already(self, key: tuple, tensors: tuple) -> bool:
        """Whether these very tensors, unchanged since, were submitted with these limits (``key``: _key of both; one
        lookup: a call of every layer asks). An id can be reused by a new tensor: the weak reference tells them
        apart."""
        seen = self._seen.get(key)
        if seen is None:
            return False
        refs, versions = seen
        return all(r is None or (r() is t and v is not None and _version(t) == v)
                   for r, v, t in zip(refs, versions, tensors))


def _key(tensors: tuple, limits: Hashable) -> tuple:
    return limits, tuple(None if t is None else id(t) for t in tensors)


def _version(t: Optional[torch.Tensor]) -> Optional[int]:
    """The tensor's version counter (bumped by every in-place write), or None where it keeps none (an inference-mode
    tensor: then it is copied and checked every time)."""
    if t is None:
        return None
    try:
        return t._version
    except RuntimeError:
        return None


def _pinned_copy(t: torch.Tensor) -> torch.Tensor:
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    host.copy_(t, non_blocking=True)
    return host


CHECKS = DeferredChecks()

__all__ = ["CHECKS", "DeferredChecks"]
