"""`frost support-matrix [--output FILE] [--check]`: print (or write, or verify) the support matrix generated
from the capability tables. Without --output it prints to stdout; --check compares a file (default
docs/support_matrix.md, relative to the current directory) and exits 1 when it differs."""

from __future__ import annotations

import os
import sys

DEFAULT = os.path.join("docs", "support_matrix.md")


def register(sub) -> None:
    p = sub.add_parser("support-matrix", help="print the support matrix generated from the capability tables")
    p.add_argument("--output", "-o", default=None, help="file to write (default: stdout; '-' is stdout too)")
    p.add_argument("--check", action="store_true",
                   help=f"write nothing; exit 1 if the file (--output, default {DEFAULT}) differs from a fresh "
                        "generation")
    p.set_defaults(func=run)


def run(args) -> int:
    from frost.analyzer import render_support_matrix

    text = render_support_matrix()
    if args.check:
        return _check(args.output or DEFAULT, text)
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {args.output}")
    return 0


def _check(path: str, text: str) -> int:
    try:
        with open(path, encoding="utf-8") as fh:
            current = fh.read()
    except OSError:
        current = None
    if current != text:
        print(f"{path} is out of date: run `frost support-matrix --output {path}`", file=sys.stderr)
        return 1
    return 0
