"""Target names: one spelling per target, so the tables and the probe compare like with like.

"sm_90a", "sm_120a" and "sm_120f" name the same hardware as "sm_90" / "sm_120" for a support question;
the suffix only matters to the compiler. A table entry "cuda" stands for every CUDA architecture."""

from __future__ import annotations

import re

from frost.errors import TargetError

ANY_CUDA = "cuda"
_SM = re.compile(r"sm_?(\d{2,3})[af]?")
ACCEPTED = "'cpu', 'cuda', or 'sm_<major><minor>' such as 'sm_90', 'sm_120', 'sm_121' (an 'a'/'f' suffix is accepted)"


def normalise_target(target: str) -> str:
    """'SM_120a' -> 'sm_120', 'cpu' -> 'cpu'; anything else raises TargetError."""
    if not isinstance(target, str):
        raise TargetError(target, ACCEPTED)
    name = target.strip().lower()
    if name in ("cpu", ANY_CUDA):
        return name
    m = _SM.fullmatch(name)
    if m is None:
        raise TargetError(target, ACCEPTED)
    return f"sm_{m.group(1)}"


def serves_target(targets: tuple[str, ...], target: str) -> bool:
    """Whether a table's target list covers a normalised target ("cuda" in the list covers every sm_*)."""
    return target in targets or (ANY_CUDA in targets and target.startswith("sm_"))
