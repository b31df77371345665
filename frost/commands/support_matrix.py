"""`frost support-matrix [--output docs/support_matrix.md] [--check]`: write (or verify) the support matrix
generated from the capability tables."""

from __future__ import annotations

import os
import sys

DEFAULT = os.path.join("docs", "support_matrix.md")


def register(sub) -> None:
    p = sub.add_parser("support-matrix", help="write the support matrix generated from the capability tables")
    p.add_argument("--output", "-o", default=DEFAULT, help=f"file to write ('-' for stdout; default {DEFAULT})")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if the file differs from a fresh generation")
    p.set_defaults(func=run)


def run(args) -> int:
    from frost.analyzer import render_support_matrix

    text = render_support_matrix()
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    if args.check:
        try:
            with open(args.output, encoding="utf-8") as fh:
                current = fh.read()
        except OSError:
            current = None
        if current != text:
            print(f"{args.output} is out of date: run `frost support-matrix --output {args.output}`", file=sys.stderr)
            return 1
        return 0
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {args.output}")
    return 0
