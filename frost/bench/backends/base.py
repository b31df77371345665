"""What a benchmarked backend is: a name, whether it is an SM120-class (mma.sync) peer, a `declines(case)` rule
set that is pure data-about-the-case (testable without a GPU), and `prepare`, which builds the timed callable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from frost.bench.cases import Case


@dataclass(frozen=True)
class Prepared:
    run: Callable[[int], object]     # run(i): one backward on input set i (enqueue only; no sync needed)
    detail: str = ""                 # e.g. frost's plan engine, FA4's kernel arch


class Backend:
    name: str = "?"
    same_class: bool = True          # mma.sync-class kernel: comparable with frost's SM120 design

    def declines(self, c: Case) -> str | None:
        """Why this backend cannot serve `c` (None: it applies). Only case facts, never the machine."""
        return None

    def applies(self, c: Case) -> bool:
        return self.declines(c) is None

    def prepare(self, c: Case, sets: list, scale: float) -> Prepared:
        raise NotImplementedError


def first_rule(c: Case, rules) -> str | None:
    """The reason of the first (predicate, reason) rule that holds for `c`."""
    return next((reason for pred, reason in rules if pred(c)), None)
