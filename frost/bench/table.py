"""Plain-text rendering of a Report: one row per (case, backend), then a per-case summary and the ceiling."""

from __future__ import annotations

from frost.bench.flops import pass_label
from frost.bench.report import Report, Result, deterministic_cost, host_time, ratio, summary


def _fmt(x: float | None, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def _grid(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = "  ".join("-" * w for w in widths)
    fmt = [("  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip() for r in [header, *rows]]
    return "\n".join([fmt[0], line, *fmt[1:]])


def _result_row(r: Result, frost: Result | None) -> list[str]:
    if not r.ok:
        return [r.case, r.backend, r.detail, r.status, "", "", "", r.note]
    rel = "" if r.backend == "frost" else _fmt(ratio(frost, r), ".2f")
    return [r.case, r.backend, r.detail, f"{r.ms:.3f}", f"{r.tflops:.1f}", rel, _fmt(r.host_us, ".1f"), r.note]


def results_table(report: Report) -> str:
    rows = []
    for c in report.cases:
        case_rows = report.rows(c["name"])
        frost = next((r for r in case_rows if r.backend == "frost"), None)
        rows += [_result_row(r, frost) for r in case_rows]
    return _grid(["case", "backend", "engine", "ms", "TFLOP/s", "frost/peer", "host us", "note"], rows)


def summary_table(report: Report) -> str:
    rows = [[s["case"], _fmt(s["frost_tflops"], ".1f"), s["best_peer"] or "-", _fmt(s["vs_best"], ".2f"),
             s["best_same_class"] or "-", _fmt(s["vs_best_same_class"], ".2f"), _fmt(s["of_ceiling"], ".0%")]
            for s in summary(report)]
    return _grid(["case", "frost TFLOP/s", "best peer", "frost/best", "best same-class", "frost/same-class",
                  "of mma ceiling"], rows)


def deterministic_table(report: Report) -> str:
    """Deterministic time / default time per backend, for the deterministic cases whose default twin ran ("" when
    the run has none)."""
    costs = deterministic_cost(report)
    if not costs:
        return ""
    backends = list(dict.fromkeys(b for row in costs for b in row["time_ratio"]))
    rows = [[row["case"], row["default_case"], *(_fmt(row["time_ratio"].get(b), ".3f") for b in backends)]
            for row in costs]
    return "deterministic / default time\n" + _grid(["case", "default case", *backends], rows)


def host_table(report: Report) -> str:
    """Host time per call per backend (median over its cases) and frost's over each peer's on the cases both ran
    ("" when the run measured none)."""
    rows = [[h["backend"], f"{h['host_us']:.1f}", str(h["cases"]), _fmt(h["frost_over_backend"], ".2f"),
             str(h["shared_cases"]) if h["backend"] != "frost" else ""] for h in host_time(report)]
    if not rows:
        return ""
    return "host time per call (us; calls enqueued back to back, no GPU wait)\n" + _grid(
        ["backend", "median us", "cases", "frost/backend", "cases shared"], rows)


def ceiling_table(report: Report) -> str:
    ceiling = report.ceiling
    if not ceiling:
        return "mma.sync ceiling: not measured (frost bench --ceiling)"
    if ceiling.get("error"):
        return f"mma.sync ceiling: n/a ({ceiling['error']})"
    rows = [[p["dtype"], str(p["ctas_per_sm"]), str(p["grid"]), f"{p['ms']:.3f}", f"{p['tflops']:.1f}"]
            for p in ceiling.get("points", [])]
    return "mma.sync m16n8k16 ceiling (registers only, fp32 accumulate)\n" + _grid(
        ["dtype", "CTAs/SM", "grid", "ms", "TFLOP/s"], rows)


def render(report: Report) -> str:
    meta = report.meta
    which = meta.get("pass", "backward")
    head = (f"frost bench: suite {meta.get('suite')}, {which}, {meta.get('dtype')}, {meta.get('device', '?')}; "
            f"TFLOP/s = {pass_label(which)} / median time (frost.bench.flops)")
    parts = [head, results_table(report), summary_table(report), deterministic_table(report), host_table(report),
             ceiling_table(report)]
    return "\n\n".join(p for p in parts if p)
