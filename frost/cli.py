"""The `frost` command line. Each subcommand lives in frost/commands/<name>.py and exposes
`register(subparsers)`, which adds its parser and sets `func(args) -> int`."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("demo", "schema", "probe", "support_matrix", "bench", "cache")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frost", description="attention backward for SM120-class GPUs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module_name = f"frost.commands.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # a command that is not part of this build
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
