"""A/B timing of kernel variants, one process per variant, alternating: the part that needs no GPU (the order of the
processes, their result lines, the comparison of their gradients, the summary table). benchmarks/ab_variants.py
runs it on the GPU machine.

Why processes: a variant compiled into the process that also runs the served kernels shares its allocator, caches
and the GPU's recent clock history; one process per variant, alternating, shows 1 % differences
(docs/performance.md). Rounds alternate direction (A B C, then C B A), so a drift over
the run (clocks, heat) does not favour the variant that always runs first."""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterable, Sequence

RESULT_PREFIX = "AB-RESULT "
SAMPLE_ELEMS = 1 << 16   # gradient elements kept per tensor for the cross-variant comparison


SET_KINDS = ("atomic", "ordered", "narrow", "mha", "dq_gemm")


def set_kind(key) -> str:
    """The kind of kernel set a frost.kernels.backward.select.KernelKey names (what a Candidate changes)."""
    return ("narrow" if key.narrow else "ordered" if key.ordered else "mha" if key.mha
            else "dq_gemm" if key.dq_gemm else "atomic")


def kernel_key(pad: int, kind: str, arch: str, dtype: str):
    """The KernelKey of the ``kind`` set at Q/K pad ``pad`` (V padded alike)."""
    from frost.kernels.backward.select import KernelKey

    return KernelKey(dtype, pad, arch, 0, kind in ("ordered", "narrow"), mha=kind == "mha", dq_gemm=kind == "dq_gemm",
                     narrow=kind == "narrow")


@dataclass(frozen=True)
class Candidate:
    """A change to one kind of kernel set at one Q/K pad: TileConfig fields, and ptxas options per arch (an arch
    not listed keeps the set's own, KernelKey.ptxas_options). ``checked``: what the CPU compile check found."""

    pad: int
    kinds: tuple
    changes: dict
    ptxas: dict = field(default_factory=dict)
    checked: str = ""

    def __post_init__(self):
        from frost.kernels.backward.catalogue import TileConfig

        if not self.kinds or any(k not in SET_KINDS for k in self.kinds):
            raise ValueError(f"Candidate.kinds {self.kinds}: one or more of {SET_KINDS}")
        unknown = set(self.changes) - set(TileConfig.__dataclass_fields__)
        if unknown:
            raise ValueError(f"Candidate.changes {sorted(unknown)}: not TileConfig fields")

    def declines(self, key) -> str | None:
        """Why this candidate does not change the kernel set ``key`` (None: it does)."""
        if key.head_dim_pad != self.pad or key.head_dim_v_pad not in (0, self.pad):
            return (f"the case runs on pad d{key.head_dim_pad}v{key.head_dim_v_pad or key.head_dim_pad}, the "
                    f"candidate changes d{self.pad}")
        if set_kind(key) not in self.kinds:
            return f"the case runs on the {set_kind(key)} set, the candidate changes {'/'.join(self.kinds)}"
        return None

    def tile(self, key):
        """The set's tile with the changes (TileConfig.check raises when they do not make a legal tile)."""
        tile = replace(key.tile, **self.changes)
        tile.check()
        return tile

    def ptxas_for(self, key) -> str | None:
        return self.ptxas.get(key.arch)

    def keys(self, arch: str, dtype: str) -> list:
        """The KernelKeys of the sets this candidate changes on one target."""
        return [kernel_key(self.pad, kind, arch, dtype) for kind in self.kinds]


def schedule(variants: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """(round, variant) in the order the processes run: forward on even rounds, backward on odd ones."""
    if rounds < 1 or not variants:
        raise ValueError(f"need at least one round and one variant, got rounds={rounds}, variants={list(variants)}")
    if len(set(variants)) != len(variants):
        raise ValueError(f"variants repeat: {list(variants)}")
    order = []
    for r in range(rounds):
        order += [(r, v) for v in (variants if r % 2 == 0 else list(reversed(variants)))]
    return order


@dataclass(frozen=True)
class Row:
    """One variant's result on one case in one round (a process prints one line per case)."""

    variant: str
    round: int
    case: str
    ms: float | None            # median of the timed calls; None when the variant did not run the case
    digest: str = ""            # sha256 over the gradients' bytes (bitwise comparison across variants and rounds)
    note: str = ""              # why there is no time (the variant does not apply, a compile error)


def result_line(row: Row) -> str:
    return RESULT_PREFIX + json.dumps(asdict(row))


def parse_results(text: str) -> list[Row]:
    """The rows a child process printed (other output lines are its log and are ignored)."""
    return [Row(**json.loads(line[len(RESULT_PREFIX):])) for line in text.splitlines()
            if line.startswith(RESULT_PREFIX)]


@dataclass(frozen=True)
class Summary:
    case: str
    variant: str
    runs: int                       # rounds with a time
    mean_ms: float | None
    min_ms: float | None
    max_ms: float | None
    ratio: float | None             # mean_ms / the baseline's mean_ms
    bitwise: bool | None            # every round's gradients byte-equal to the baseline's first (None: unknown)
    max_rel_diff: float | None      # max |g - g_baseline| / max |g_baseline| over the sampled elements
    note: str = ""

    @property
    def spread(self) -> float | None:
        """(max - min) / mean of the rounds: the noise to read the ratio against."""
        if not self.mean_ms or self.runs < 2:
            return None
        return (self.max_ms - self.min_ms) / self.mean_ms


def summarise(rows: Iterable[Row], baseline: str, diffs: dict | None = None) -> list[Summary]:
    """One Summary per (case, variant), cases and variants in first-seen order; ``diffs`` maps (case, variant) to
    sample_diff's value."""
    rows = list(rows)
    cases = list(dict.fromkeys(r.case for r in rows))
    variants = list(dict.fromkeys(r.variant for r in rows))
    out = []
    for case in cases:
        base = [r for r in rows if r.case == case and r.variant == baseline]
        base_ms = _mean([r.ms for r in base])
        base_digest = next((r.digest for r in base if r.digest), "")
        for v in variants:
            mine = [r for r in rows if r.case == case and r.variant == v]
            times = [r.ms for r in mine if r.ms is not None]
            mean = _mean(times)
            digests = [r.digest for r in mine if r.ms is not None]
            bitwise = (all(d == base_digest for d in digests) if base_digest and digests and all(digests)
                       else None)
            out.append(Summary(case, v, len(times), mean, min(times, default=None), max(times, default=None),
                               mean / base_ms if mean and base_ms else None, bitwise,
                               (diffs or {}).get((case, v)), "; ".join(dict.fromkeys(r.note for r in mine if r.note))))
    return out


def _mean(values) -> float | None:
    values = [x for x in values if x is not None]
    return statistics.fmean(values) if values else None


def format_table(summaries: Sequence[Summary], baseline: str) -> str:
    head = (f"{'case':<28} {'variant':<24} {'runs':>4} {'mean ms':>9} {'spread':>7} {f'/ {baseline}':>10} "
            f"{'bitwise':>7} {'max rel diff':>12}  note")
    lines = [head, "-" * len(head)]
    for s in summaries:
        lines.append(f"{s.case:<28} {s.variant:<24} {s.runs:>4} {_num(s.mean_ms, '.3f'):>9} "
                     f"{_num(None if s.spread is None else 100 * s.spread, '.1f', '%'):>7} "
                     f"{_num(s.ratio, '.3f', 'x'):>10} {_flag(s.bitwise):>7} {_num(s.max_rel_diff, '.1e'):>12}  "
                     f"{s.note}")
    return "\n".join(lines)


def _num(x, fmt: str, unit: str = "") -> str:
    return "-" if x is None else f"{x:{fmt}}{unit}"


def _flag(b: bool | None) -> str:
    return "-" if b is None else "yes" if b else "no"


def sample_path(directory, case: str, variant: str, rnd: int) -> Path:
    """Where a child keeps its gradient sample (names reduced to file-safe characters)."""
    safe = lambda s: re.sub(r"[^A-Za-z0-9_.-]", "_", s)  # noqa: E731
    return Path(directory) / f"{safe(case)}__{safe(variant)}__r{rnd}.pt"


def gradient_sample(grads) -> list:
    """Every n-th element of each gradient (n so that about SAMPLE_ELEMS remain), as fp32 CPU tensors."""
    out = []
    for g in grads:
        flat = g.detach().reshape(-1)
        step = max(1, flat.numel() // SAMPLE_ELEMS)
        out.append(flat[::step].float().cpu())
    return out


def sample_diff(directory, case: str, variant: str, baseline: str, rounds: int) -> float | None:
    """max over rounds and gradients of max|sample - baseline's round-0 sample| / max|baseline sample|; None when a
    sample is missing."""
    import torch

    ref_path = sample_path(directory, case, baseline, 0)
    if not ref_path.exists():
        return None
    ref = torch.load(ref_path)
    worst = None
    for r in range(rounds):
        path = sample_path(directory, case, variant, r)
        if not path.exists():
            continue
        for a, b in zip(torch.load(path), ref):
            scale = b.abs().max().item() or 1.0
            d = (a - b).abs().max().item() / scale
            worst = d if worst is None else max(worst, d)
    return worst


def parse_case(text: str):
    """A case of an A/B run: a case name of frost.bench.cases' suites, or ``B,Hq,Hkv,S,D`` followed by any of
    ``causal``, ``window=W`` (implies causal) and ``sink``; either may end in ``det`` (deterministic mode).
    Returns (Case, deterministic, label)."""
    from frost.bench.cases import SUITES

    tokens = [t.strip() for t in text.split(",") if t.strip()]
    det = bool(tokens) and tokens[-1] == "det"
    if det:
        tokens = tokens[:-1]
    named = {c.name: c for suite in SUITES.values() for c in suite}
    if len(tokens) == 1 and tokens[0] in named:
        c = named[tokens[0]]
    else:
        c = _spec_case(tokens, text, sorted(named))
    return c, det, c.name + ("+det" if det else "")


def _spec_case(tokens: list, text: str, names: list):
    from frost.bench.cases import case

    accepted = (f"a case name ({', '.join(names)}) or B,Hq,Hkv,S,D[,causal][,window=W][,sink], "
                "optionally ending in ,det")
    try:
        b, hq, hkv, s, d = (int(t) for t in tokens[:5])
    except ValueError:
        raise ValueError(f"A/B case {text!r}: expected {accepted}") from None
    causal, window, sink = False, None, False
    for t in tokens[5:]:
        if t == "causal":
            causal = True
        elif t == "sink":
            sink = True
        elif t.startswith("window=") and t[7:].isdigit():
            window, causal = int(t[7:]), True
        else:
            raise ValueError(f"A/B case {text!r}: unknown flag {t!r}; expected {accepted}")
    name = (f"b{b}h{hq}" + (f"/{hkv}" if hkv != hq else "") + f"s{s}d{d}" + ("-causal" if causal else "")
            + (f"-w{window}" if window else "") + ("-sink" if sink else ""))
    return case(name, b, hq, s, d, hkv=hkv, causal=causal, window=window, sink=sink)
