"""Markdown speed tables for README.md and docs/performance.md, generated from saved `frost bench` JSON files (the
backward, the forward and the training step of the full suite: one `frost bench --suite full --pass all` run), with
the host time per call and the deterministic mode's cost of the same run.

The docs quote the runs in docs/bench/ through these tables only, so a number in the docs is a number of that run,
and tests/docs checks that each file's table equals a fresh generation. Light on import (no torch).

    python3 -m frost.bench.doc_tables            # rewrite the tables between their markers
    python3 -m frost.bench.doc_tables --check    # exit 1 when a file's table differs from the JSON's
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from frost.bench.cases import Case
from frost.bench.report import Report, Result, ceiling_tflops, deterministic_cost, host_time, ratio
from frost.errors import FrostError

BENCH_JSON = "docs/bench/bench_full_bf16.json"
FORWARD_JSON = "docs/bench/bench_full_bf16_forward.json"
STEP_JSON = "docs/bench/bench_full_bf16_step.json"
PASS_JSONS = {"forward": FORWARD_JSON, "backward": BENCH_JSON, "step": STEP_JSON}
# backend name in the JSON -> column label; the same-class peers (built for SM120-class parts) first
PEER_LABELS = {"torch-flash": "FA2 (torch flash)", "fa4": "FA4 (SM120 kernels)",
               "torch-cudnn": "cuDNN (sm_90 kernels)", "torch-efficient": "torch mem-efficient"}
README_PEERS = ("torch-flash", "fa4", "torch-cudnn")
README_FORWARD_PEERS = ("torch-flash", "fa4")


class DocTableError(FrostError):
    """A bench file without what a table needs, or a doc without the markers a table goes between."""


def begin_marker(name: str) -> str:
    return f"<!-- BEGIN GENERATED {name} (python3 -m frost.bench.doc_tables) -->"


def end_marker(name: str) -> str:
    return f"<!-- END GENERATED {name} -->"


def load_report(path: str | Path) -> Report:
    with open(path, encoding="utf-8") as fh:
        report = Report.from_dict(json.load(fh))
    for key in ("date", "device", "dtype"):
        if not report.meta.get(key):
            raise DocTableError(f"{path}: meta.{key} is missing; a table names the run's {key} "
                                f"(add \"{key}\" to the file's meta)")
    return report


def case_shape(case: dict) -> str:
    """A saved case's problem in the docs' words (Case.words)."""
    return Case.from_dict(case).words()


# how the run held the backends to SM120's shared memory per SM (meta.peer_smem; runs before it: "free")
SMEM_WORDS = {"free": "frost held to SM120's occupancy, the peers' kernels not (they had the GPU's shared memory "
                      "per SM)",
              "padded": "frost's and FA4's kernels launched at SM120's occupancy, torch's not (they had the GPU's "
                        "shared memory per SM)",
              "sm120": "every backend held to SM120's 100 KB of shared memory per SM"}


def smem_words(meta: dict) -> str:
    """"; " + how the run held the backends to SM120's shared memory, or "" on an SM120-class part itself."""
    if str(meta.get("capability", "")).startswith("sm_12"):
        return ""
    return "; " + SMEM_WORDS[meta.get("peer_smem", "free")]


def caption(report: Report) -> str:
    m, versions = report.meta, report.meta.get("versions", {})
    peers = ", ".join(f"{name} {versions[name]}" for name in ("torch", "flash-attn-4") if versions.get(name))
    return (f"{m.get('pass', 'backward').capitalize()}, {m['dtype']}, one {m['device']} "
            f"({m.get('capability', '?')}), run of {m['date']}"
            f"{'; ' + peers if peers else ''}{smem_words(m)}. A peer's cell is its "
            f"time ÷ frost's time (> 1: frost is faster); \"-\": the peer cannot run the case.")


def _grid(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _frost(rows: list[Result]) -> Result | None:
    return next((r for r in rows if r.backend == "frost" and r.ok), None)


def _vs(frost: Result | None, rows: list[Result], backend: str) -> str:
    value = ratio(frost, next((r for r in rows if r.backend == backend), None))
    return "-" if value is None else f"{value:.2f}"


def readme_table(report: Report, peers: tuple[str, ...] = README_PEERS) -> str:
    """One row per case: frost's TFLOP/s and its speed against ``peers`` (FA2, FA4's SM120 kernels, cuDNN)."""
    rows = []
    for case in report.cases:
        results = report.rows(case["name"])
        frost = _frost(results)
        rows.append([case_shape(case), "-" if frost is None else f"{frost.tflops:.0f}",
                     *(_vs(frost, results, p) for p in peers)])
    header = ["case", "frost TFLOP/s", *(f"vs {PEER_LABELS[p]}" for p in peers)]
    return caption(report) + "\n\n" + _grid(header, rows)


def readme_forward_table(report: Report) -> str:
    """The README's forward table: the same-class peers only (the forward run measures no cuDNN)."""
    return readme_table(report, README_FORWARD_PEERS)


def full_table(report: Report) -> str:
    """One row per case: frost's time, TFLOP/s and share of the mma.sync ceiling, and its speed against every peer."""
    peers = [p for p in PEER_LABELS if any(r.backend == p for r in report.results)]
    peers += sorted({r.backend for r in report.results} - set(peers) - {"frost"})
    roof = ceiling_tflops(report, report.meta["dtype"])
    rows = []
    for case in report.cases:
        results = report.rows(case["name"])
        frost = _frost(results)
        timed = [f"{frost.ms:.3f}", f"{frost.tflops:.1f}",
                 f"{frost.tflops / roof:.0%}" if roof else "-"] if frost else ["-", "-", "-"]
        rows.append([case["name"], case_shape(case), *timed, *(_vs(frost, results, p) for p in peers)])
    header = ["case", "shape", "frost ms", "frost TFLOP/s", "of ceiling",
              *(f"vs {PEER_LABELS.get(p, p)}" for p in peers)]
    ceiling = f" The mma.sync ceiling (registers only) measured {roof:.0f} TFLOP/s." if roof else ""
    return caption(report) + ceiling + "\n\n" + _grid(header, rows)


def host_table(reports: dict[str, Report]) -> str:
    """Per pass: each backend's median host time per call over the cases it ran, and frost's over the peer's (the
    median over the cases both ran; < 1: frost's calls return sooner)."""
    backends = list(dict.fromkeys(h["backend"] for r in reports.values() for h in host_time(r)))
    rows = []
    for which, report in reports.items():
        by = {h["backend"]: h for h in host_time(report)}
        cells = [f"{by[b]['host_us']:.0f}" + ("" if b == "frost" or by[b]["frost_over_backend"] is None
                                              else f" ({by[b]['frost_over_backend']:.2f})")
                 if b in by else "-" for b in backends]
        rows.append([which, *cells])
    first = next(iter(reports.values()))
    head = (f"Host time per call in µs, {first.meta['device']}, run of {first.meta['date']} (the runs above): the "
            f"median over a pass's cases of the time a call takes to return, calls enqueued back to back while the "
            f"GPU works (frost.bench.timing.host_us). In brackets: frost's host time ÷ the peer's on the cases both "
            f"ran (< 1: frost's calls return sooner).")
    return head + "\n\n" + _grid(["pass", *(PEER_LABELS.get(b, b) for b in backends)], rows)


def deterministic_table(reports: dict[str, Report]) -> str:
    """Per deterministic case of the run and per pass that has its default twin (the backward and the step: a
    forward is the same in both modes): each backend's deterministic time over its default-mode time."""
    costs = [(which, row) for which, report in reports.items() if which != "forward"
             for row in deterministic_cost(report)]
    backends = list(dict.fromkeys(b for _, row in costs for b in row["time_ratio"]))
    rows = [[which, row["case"], *(f"{row['time_ratio'][b]:.3f}" if b in row["time_ratio"] else "-"
                                   for b in backends)] for which, row in costs]
    return ("Deterministic time ÷ default time, same run (FA4's SM120 backward, cuDNN and torch's mem-efficient "
            "backward have no deterministic mode).\n\n"
            + _grid(["pass", "case", *(PEER_LABELS.get(b, b) for b in backends)], rows))


# (file relative to the repository root, table name) -> (the bench file it quotes, the function that renders it);
# a source of None renders from every pass's report (by pass name)
TABLES: dict[tuple[str, str], tuple[str | None, Callable[..., str]]] = {
    ("README.md", "speed-table"): (BENCH_JSON, readme_table),
    ("README.md", "forward-table"): (FORWARD_JSON, readme_forward_table),
    ("docs/performance.md", "speed-table"): (BENCH_JSON, full_table),
    ("docs/performance.md", "forward-table"): (FORWARD_JSON, full_table),
    ("docs/performance.md", "step-table"): (STEP_JSON, full_table),
    ("docs/performance.md", "host-table"): (None, host_table),
    ("docs/performance.md", "deterministic-table"): (None, deterministic_table),
}


def replace_between(text: str, name: str, body: str, where: str = "the document") -> str:
    """``text`` with everything between the BEGIN/END markers of ``name`` replaced by ``body``."""
    begin, end = begin_marker(name), end_marker(name)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise DocTableError(f"{where}: no {begin!r} ... {end!r} pair; add the two markers where the table goes")
    return text[:start + len(begin)] + "\n" + body.rstrip("\n") + "\n" + text[stop:]


def render(root: Path) -> dict[Path, str]:
    """Every file with its tables regenerated from the bench files under ``root`` (file path -> new text)."""
    by_pass = {which: load_report(root / rel) for which, rel in PASS_JSONS.items()}
    by_file = {PASS_JSONS[which]: report for which, report in by_pass.items()}
    out: dict[Path, str] = {}
    for (rel, name), (source, fn) in TABLES.items():
        path = root / rel
        text = out.get(path) or path.read_text(encoding="utf-8")
        body = fn(by_pass) if source is None else fn(by_file[source])
        out[path] = replace_between(text, name, body, str(rel))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m frost.bench.doc_tables", description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=".", help="the repository root (default: the current directory)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table is out of date")
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        fresh = render(root)
    except (DocTableError, OSError) as exc:
        print(f"doc_tables: {exc}", file=sys.stderr)
        return 2
    stale = [p for p, text in fresh.items() if p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in stale:
            print(f"{p}: speed table out of date; run `python3 -m frost.bench.doc_tables`", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(fresh[p], encoding="utf-8")
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
