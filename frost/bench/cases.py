"""Benchmark cases as data (a new case is a new row, not a new branch): the standard suite of training shapes (MHA
and GQA at head dims 64-256, gpt-oss with its sink and 128-token window, long and short sequences), and the rows
where a peer led frost's backward (head dim 256, deterministic mode) with their default-mode twins."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Case:
    """One attention backward shape. `window` is a sliding window of that many keys, the query's own included
    (GPT-OSS convention): with causal=True key j is kept iff i - (window - 1) <= j <= i. `deterministic`: the
    backward runs bitwise reproducible (frost's deterministic mode; a peer runs its own or declines)."""

    name: str
    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seq_kv: int
    head_dim: int
    head_dim_v: int
    causal: bool = False
    window: int | None = None
    sink: bool = False
    deterministic: bool = False

    def __post_init__(self) -> None:
        if self.heads_q % self.heads_kv:
            raise ValueError(f"{self.name}: heads_q {self.heads_q} is not a multiple of heads_kv {self.heads_kv}")
        if self.window is not None and (self.window < 1 or not self.causal):
            raise ValueError(f"{self.name}: a window needs causal=True and window >= 1")

    @property
    def band(self) -> tuple[int | None, int | None]:
        """(left, right) band bounds around the diagonal (top-left aligned); None means unbounded."""
        left = None if self.window is None else self.window - 1
        return left, (0 if self.causal else None)

    @property
    def gqa(self) -> bool:
        return self.heads_q != self.heads_kv

    def as_dict(self) -> dict:
        return asdict(self)


def case(name: str, b: int, hq: int, s: int, d: int, *, hkv: int | None = None, causal: bool = False,
         window: int | None = None, sink: bool = False) -> Case:
    """A self-attention case (Sq = Skv, Dqk = Dv), the only kind the suites measure."""
    return Case(name, b, hq, hkv or hq, s, s, d, d, causal, window, sink)


STANDARD = (
    case("mha-d64", 4, 16, 4096, 64),
    case("mha-d64-causal", 4, 16, 4096, 64, causal=True),
    case("mha-d128", 4, 16, 4096, 128),
    case("mha-d128-causal", 4, 16, 4096, 128, causal=True),
    case("gqa32/8-d128-causal", 2, 32, 4096, 128, hkv=8, causal=True),
    case("gptoss-causal", 2, 64, 4096, 64, hkv=8, causal=True),
    case("gptoss-causal-sink", 2, 64, 4096, 64, hkv=8, causal=True, sink=True),
    case("gptoss-swa128-sink", 2, 64, 4096, 64, hkv=8, causal=True, window=128, sink=True),
    case("d192-causal", 2, 16, 4096, 192, causal=True),
    case("d256-causal", 2, 16, 4096, 256, causal=True),
    case("s16k-d128-causal", 1, 16, 16384, 128, causal=True),
    case("s1k-d64", 16, 16, 1024, 64),
)


def deterministic_twin(c: Case) -> Case:
    """The same shape with a deterministic backward, named ``<name>-det``."""
    return replace(c, name=c.name + "-det", deterministic=True)


def _standard(name: str) -> Case:
    return next(c for c in STANDARD if c.name == name)


# Head dim 256 without and with a causal mask, and the shapes whose deterministic mode is judged against their
# default mode (each default row right before its deterministic twin).
D256_DET = (
    case("d256", 2, 16, 4096, 256),
    _standard("d256-causal"),
    *(row for name in ("gptoss-causal", "gqa32/8-d128-causal", "gptoss-swa128-sink")
      for row in (_standard(name), deterministic_twin(_standard(name)))),
)

QUICK = (
    case("quick-gqa8/2-d128-causal", 2, 8, 1024, 128, hkv=2, causal=True),
    case("quick-gptoss-swa128-sink", 1, 16, 1024, 64, hkv=2, causal=True, window=128, sink=True),
)

SUITES: dict[str, tuple[Case, ...]] = {"standard": STANDARD, "d256-det": D256_DET, "quick": QUICK, "none": ()}


def select(suite: str, only: str | None = None) -> tuple[Case, ...]:
    """The suite's cases, optionally only those whose name contains one of the comma-separated `only` words."""
    cases = SUITES[suite]
    if not only:
        return cases
    words = [w for w in only.split(",") if w]
    return tuple(c for c in cases if any(w in c.name for w in words))
