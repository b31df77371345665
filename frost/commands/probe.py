"""`frost probe graph.json [--target sm_120] [--engine cute_sm120] [--json]`: the support check from a shell.

The exit code answers the question asked: 0 when every attention op is served (by the engine named with --engine,
else by any engine, as frost.compile would run it), 1 when not (the report is printed either way), 2 when the
graph is malformed or unreadable, or the target or engine is unknown (one line on stderr)."""

from __future__ import annotations

import argparse
import sys

EXIT_CODES = """exit codes:
  0  served: every attention op has an engine (the --engine one, when given)
  1  not served (the report says why)
  2  bad input: unreadable or malformed graph, unknown --target or --engine

"does a GPU kernel serve this?":  frost probe graph.json --target sm_120 --engine cute_sm120
Without --engine every engine is asked, and the reference engine (plain torch) serves nearly every graph."""


def register(sub) -> None:
    from frost.analyzer.capability import engine_names

    p = sub.add_parser("probe", help="can frost serve this graph? every engine's reasons (exit 0 yes, 1 no, "
                       "2 bad input)", epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graph", help="a graph JSON file (see `frost schema`); '-' reads stdin")
    p.add_argument("--target", help="cpu, cuda, sm_90, sm_120, sm_121 (a/f suffix ok); default: this machine")
    p.add_argument("--engine", choices=engine_names(),
                   help="ask this engine alone (cute_sm120: the GPU kernels); default: every engine")
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
    from frost.api.support import check_support

    try:
        report = check_support(Graph.from_json(_read(args.graph)), args.target, engine=args.engine)
    except (FrostError, OSError) as exc:   # GraphError, TargetError, EngineError, a missing file
        print(f"frost probe: {exc}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        print(f"frost probe: {args.graph}: not UTF-8 text, as graph JSON is ({exc.reason} at byte {exc.start})",
              file=sys.stderr)
        return 2
    print(report.model_dump_json(indent=2) if args.json else report.to_text())
    return 0 if report.supported else 1
