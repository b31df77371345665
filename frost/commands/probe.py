"""`frost probe graph.json [--target sm_120] [--json]`: the support check from a shell.

Exit 0 when supported, 1 when not (the report is printed either way), 2 when the graph is malformed or unreadable
or the target is unknown (the error is printed to stderr)."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("probe",
                       help="can frost serve this graph? every engine's reasons (exit 0 yes, 1 no, 2 bad input)")
    p.add_argument("graph", help="a graph JSON file (see `frost schema`); '-' reads stdin")
    p.add_argument("--target", help="cpu, cuda, sm_90, sm_120, sm_121 (a/f suffix ok); default: this machine")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def run(args) -> int:
    from frost.errors import FrostError
    from frost.ir import Graph
    from frost.support import check_support

    try:
        report = check_support(Graph.from_json(_read(args.graph)), args.target)
    except (FrostError, OSError) as exc:   # GraphError, TargetError, a missing file
        print(f"frost probe: {exc}", file=sys.stderr)
        return 2
    print(report.model_dump_json(indent=2) if args.json else report.to_text())
    return 0 if report.supported else 1
