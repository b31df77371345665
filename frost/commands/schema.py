"""`frost schema`: print the JSON schema of the graph IR."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("schema", help="print the JSON schema of a frost graph")
    p.add_argument("--output", "-o", help="write to this file instead of stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    from frost.ir import Graph

    text = json.dumps(Graph.model_json_schema(), indent=2)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    else:
        print(text)
    return 0
