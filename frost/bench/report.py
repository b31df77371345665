"""The results of one `frost bench` run as plain data: rows (case × backend), ratios, the mma ceiling, and the JSON
form that the table and the chart are rendered from (so either can be regenerated from a saved file)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

OK, NA, SKIPPED = "ok", "n/a", "skipped"


@dataclass
class Result:
    case: str
    backend: str
    status: str                      # ok | n/a | skipped
    ms: float | None = None
    tflops: float | None = None
    same_class: bool = True
    detail: str = ""                 # frost: plan engine; fa4: kernel arch
    note: str = ""                   # the reason for n/a / skipped; timed calls for ok
    host_us: float | None = None     # host time per call (timing.host_us), when measured

    @property
    def ok(self) -> bool:
        return self.status == OK and self.tflops is not None


@dataclass
class Report:
    meta: dict = field(default_factory=dict)
    cases: list[dict] = field(default_factory=list)          # Case.as_dict() + "flops"
    results: list[Result] = field(default_factory=list)
    ceiling: dict = field(default_factory=dict)               # {"points": [...], "error": str} when measured

    def to_dict(self) -> dict:
        return {"meta": self.meta, "cases": self.cases, "results": [asdict(r) for r in self.results],
                "ceiling": self.ceiling, "summary": summary(self), "deterministic_cost": deterministic_cost(self),
                "host_time": host_time(self)}

    @classmethod
    def from_dict(cls, d: dict) -> Report:
        return cls(d.get("meta", {}), d.get("cases", []), [Result(**r) for r in d.get("results", [])],
                   d.get("ceiling", {}))

    def rows(self, case: str) -> list[Result]:
        return [r for r in self.results if r.case == case]


def ratio(frost: Result | None, peer: Result | None) -> float | None:
    """frost / peer in TFLOP/s (> 1: frost is faster); None unless both were measured."""
    if frost is None or peer is None or not frost.ok or not peer.ok or not peer.tflops:
        return None
    return frost.tflops / peer.tflops


def best_peer(rows: list[Result], same_class_only: bool) -> Result | None:
    peers = [r for r in rows if r.backend != "frost" and r.ok and (r.same_class or not same_class_only)]
    return max(peers, key=lambda r: r.tflops, default=None)


def ceiling_tflops(report: Report, dtype: str) -> float | None:
    """The best measured mma.sync TFLOP/s for `dtype` (over CTAs per SM), if the ceiling was measured."""
    values = [p["tflops"] for p in report.ceiling.get("points", []) if p.get("dtype") == dtype]
    return max(values, default=None)


def summary(report: Report) -> list[dict]:
    """Per case: frost's TFLOP/s, its ratio to the best peer and the best same-class peer, % of the ceiling."""
    roof = ceiling_tflops(report, report.meta.get("dtype", "bfloat16"))
    out = []
    for c in report.cases:
        rows = report.rows(c["name"])
        frost = next((r for r in rows if r.backend == "frost"), None)
        best, best_same = best_peer(rows, False), best_peer(rows, True)
        out.append({
            "case": c["name"], "frost_tflops": frost.tflops if frost and frost.ok else None,
            "best_peer": best.backend if best else None, "vs_best": ratio(frost, best),
            "best_same_class": best_same.backend if best_same else None, "vs_best_same_class": ratio(frost, best_same),
            "of_ceiling": (frost.tflops / roof) if (frost and frost.ok and roof) else None,
        })
    return out


def deterministic_cost(report: Report) -> list[dict]:
    """Per deterministic case whose default-mode twin (same shape, not deterministic) is in the run: each backend's
    deterministic time over its default time, where it measured both."""
    def shape(c: dict) -> tuple:
        return tuple(sorted((k, v) for k, v in c.items() if k not in ("name", "deterministic", "flops")))

    defaults = {shape(c): c["name"] for c in report.cases if not c.get("deterministic")}
    out = []
    for c in report.cases:
        twin = defaults.get(shape(c)) if c.get("deterministic") else None
        if twin is None:
            continue
        base = {r.backend: r for r in report.rows(twin) if r.ok}
        ratios = {r.backend: r.ms / base[r.backend].ms for r in report.rows(c["name"]) if r.ok and r.backend in base}
        out.append({"case": c["name"], "default_case": twin, "time_ratio": ratios})
    return out


def host_time(report: Report) -> list[dict[str, Any]]:
    """Per backend whose host time was measured: its median host time per call over the run's cases, and, for a
    peer, the median over the cases both it and frost ran of frost's host time over the peer's (< 1: frost's calls
    return sooner)."""
    timed: dict[str, dict[str, float]] = {}
    for r in report.results:
        if r.ok and r.host_us is not None:
            timed.setdefault(r.backend, {})[r.case] = r.host_us
    mine = timed.get("frost", {})
    out = []
    for backend, per_case in timed.items():
        shared = [case for case in per_case if case in mine]
        vs = statistics.median(mine[c] / per_case[c] for c in shared) if shared and backend != "frost" else None
        out.append({"backend": backend, "host_us": statistics.median(per_case.values()), "cases": len(per_case),
                    "frost_over_backend": vs, "shared_cases": len(shared)})
    return out
