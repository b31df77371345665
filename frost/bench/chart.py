"""PNG bar chart of a Report (TFLOP/s per case, one bar per backend, n/a marked, the mma.sync ceiling as a line).
matplotlib is optional (the `bench` extra): without it the chart is skipped with a message, and
`frost bench --render FILE.json` draws it later on any machine that has it."""

from __future__ import annotations

from frost.bench.flops import pass_label
from frost.bench.report import Report, ceiling_tflops


def write_chart(report: Report, path: str) -> str:
    """Draw the chart to `path`; returns a one-line message (written, or why not)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "chart skipped: matplotlib is not installed (pip install matplotlib, then frost bench --render JSON)"
    cases = [c["name"] for c in report.cases]
    backends = list(dict.fromkeys(r.backend for r in report.results))
    if not cases or not backends:
        return "chart skipped: no results"
    fig, ax = plt.subplots(figsize=(max(8.0, 0.35 * len(cases) * len(backends)), 5.5))
    width = 0.8 / len(backends)
    for k, name in enumerate(backends):
        xs = [i + k * width for i in range(len(cases))]
        values = [_tflops(report, case, name) for case in cases]
        bars = ax.bar(xs, [v or 0.0 for v in values], width, label=name)
        labels = ["n/a" if v is None else f"{v:.0f}" for v in values]
        ax.bar_label(bars, labels, fontsize=6, rotation=90, padding=2)
    roof = ceiling_tflops(report, report.meta.get("dtype", "bfloat16"))
    if roof:
        ax.axhline(roof, color="black", linestyle="--", linewidth=1, label=f"mma.sync ceiling {roof:.0f}")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))], cases, rotation=30, ha="right", fontsize=8)
    which = report.meta.get("pass", "backward")
    ax.set_ylabel(f"TFLOP/s: {pass_label(which)}")
    ax.set_title(f"attention {which}, {report.meta.get('dtype')}, {report.meta.get('device') or 'no GPU'}")
    ax.margins(y=0.15)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"chart written: {path}"


def _tflops(report: Report, case: str, backend: str) -> float | None:
    r = next((r for r in report.rows(case) if r.backend == backend), None)
    return r.tflops if r is not None and r.ok else None
