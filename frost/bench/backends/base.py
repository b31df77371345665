"""What a benchmarked backend is: a name, whether it is an SM120-class (mma.sync) peer, a `declines(case, which)` rule
set that is pure data-about-the-case (testable without a GPU), and `prepare`, which builds the timed callable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from frost import spec
from frost.bench.cases import Case


@dataclass(frozen=True)
class Prepared:
    run: Callable[[int], object]     # run(i): one timed pass on input set i (enqueue only; no sync needed)
    detail: str = ""                 # e.g. frost's plan engine, FA4's kernel arch


class Backend:
    name: str = "?"
    same_class: bool = True          # mma.sync-class kernel: comparable with frost's SM120 design
    holds_itself: bool = False       # its kernels keep SM120's occupancy themselves: never timed under a SmemHold
    takes: frozenset[str] = frozenset()   # the frost.spec optional inputs it passes on to its kernels

    def declines(self, c: Case, which: str = "backward") -> str | None:
        """Why this backend cannot time pass ``which`` (flops.PASSES) of `c` (None: it applies). Only case
        facts, never the machine."""
        return self.untaken(c)

    def untaken(self, c: Case) -> str | None:
        """Why `c` is declined when it gives an optional input this backend does not pass on (frost.spec's words
        for what is missing), else None: timing it without the input would time other work."""
        for role in c.optional_inputs:
            if role not in self.takes:
                feature = spec.ROLES[role].feature
                words = next(f.declined for f in spec.INPUT_FEATURES if f.facts == feature)
                return f"{self.name}: {words}"
        return None

    def applies(self, c: Case, which: str = "backward") -> bool:
        return self.declines(c, which) is None

    def prepare(self, c: Case, sets: list, scale: float, which: str = "backward") -> Prepared:
        raise NotImplementedError


def autograd_step(forward, leaves: tuple, dout):
    """run() of a training step: ``forward(*leaves)`` then the gradients of every leaf for ``dout``."""
    import torch

    def run(_: int):
        out = forward(*leaves)
        return torch.autograd.grad(out, leaves, dout)

    return run


def first_rule(c: Case, rules) -> str | None:
    """The reason of the first (predicate, reason) rule that holds for `c`."""
    return next((reason for pred, reason in rules if pred(c)), None)
