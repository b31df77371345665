"""Benchmark cases as data (a new case is a new row, not a new branch): the standard suite of training shapes (MHA
and GQA at head dims 64-256, gpt-oss with its sink and 128-token window, long and short sequences), and the rows
where a peer led frost's backward (head dim 256, deterministic mode) with their default-mode twins, and the two
together."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from frost import spec

# the fields that size a case, and the dims letters (frost.spec's shapes) they give
DIMS = {"batch": "B", "heads_q": "Hq", "heads_kv": "Hkv", "seq_q": "Sq", "seq_kv": "Skv", "head_dim": "Dqk",
        "head_dim_v": "Dv"}
MODES = ("deterministic",)   # how the backward runs, not what it computes


@dataclass(frozen=True)
class Case:
    """One attention backward shape. `window` is a sliding window of that many keys, the query's own included
    (GPT-OSS convention): with causal=True key j is kept iff i - (window - 1) <= j <= i. `deterministic`: the
    backward runs bitwise reproducible (frost's deterministic mode; a peer runs its own or declines). A boolean
    field named by a frost.spec optional role (`sink`) gives that input."""

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
        if not spec.heads_divide(self.heads_q, self.heads_kv):
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

    @classmethod
    def from_dict(cls, d: dict) -> "Case":
        """The case a saved run's dict describes (keys that are no field, such as its flops, left out)."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})

    def shape(self, role: str) -> tuple[int, ...]:
        """The dense (BSHD) shape of a frost.spec tensor role in this case."""
        return spec.ROLES[role].extents({letter: getattr(self, name) for name, letter in DIMS.items()})

    @property
    def optional_inputs(self) -> tuple[str, ...]:
        """The frost.spec roles of the optional inputs this case gives, in spec order."""
        return tuple(t.role for t in spec.TENSORS if t.optional and getattr(self, t.role, False) is True)

    def features(self) -> dict[str, object]:
        """What the case computes beyond its dims (its mask and optional inputs), field by field."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("name", *DIMS, *MODES)}

    def words(self) -> str:
        """The problem in the docs' words: batch, heads (q/kv), lengths, head dims, then every feature and mode
        that is on, by name (with its value when it has one)."""
        parts = [f"B{self.batch}", "H" + _pair(self.heads_q, self.heads_kv), "S" + _pair(self.seq_q, self.seq_kv),
                 "D" + _pair(self.head_dim, self.head_dim_v)]
        on = {**self.features(), **{m: getattr(self, m) for m in MODES}}
        return " ".join(parts + [k if v is True else f"{k} {v}" for k, v in on.items() if v])

    def header(self) -> str:
        """The problem as a run's log states it: the dims the suites vary, then every feature, on or off."""
        dims = f"B={self.batch} Hq={self.heads_q} Hkv={self.heads_kv} S={self.seq_q} D={self.head_dim}"
        return " ".join([dims, *(f"{k}={v}" for k, v in self.features().items())])


def _pair(first: int, second: int) -> str:
    """One number when both sides agree (q/kv heads, lengths, head dims), else first/second."""
    return f"{first}" if first == second else f"{first}/{second}"


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

# Sliding windows without a sink, which FA4 runs too (the standard suite's window has a sink, which no peer serves).
WINDOWS = (
    case("mha-d128-swa256", 4, 16, 4096, 128, causal=True, window=256),
    case("gptoss-swa128", 2, 64, 4096, 64, hkv=8, causal=True, window=128),
)

# Every row the performance page quotes, in one run: the standard suite, then what D256_DET and WINDOWS add to it.
FULL = STANDARD + tuple(c for c in D256_DET if c not in STANDARD) + WINDOWS

QUICK = (
    case("quick-gqa8/2-d128-causal", 2, 8, 1024, 128, hkv=2, causal=True),
    case("quick-gptoss-swa128-sink", 1, 16, 1024, 64, hkv=2, causal=True, window=128, sink=True),
)

SUITES: dict[str, tuple[Case, ...]] = {"standard": STANDARD, "d256-det": D256_DET, "full": FULL, "quick": QUICK,
                                       "none": ()}
SUITE_WORDS: dict[str, str] = {
    "standard": "training shapes (MHA, GQA, gpt-oss with sink and window, head dims 64-256, S 1k-16k)",
    "d256-det": "head dim 256 and deterministic mode beside its default-mode twins",
    "full": "standard, then d256-det's other rows (head dim 256 without a mask, the deterministic twins) and two "
            "windows without a sink",
    "quick": "two small cases",
}


def select(suite: str, only: str | None = None) -> tuple[Case, ...]:
    """The suite's cases, optionally only those whose name contains one of the comma-separated `only` words."""
    cases = SUITES[suite]
    if not only:
        return cases
    words = [w for w in only.split(",") if w]
    return tuple(c for c in cases if any(w in c.name for w in words))
