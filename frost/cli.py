"""The `frost` command line. Each subcommand lives in frost/commands/<name>.py and exposes
`register(subparsers)`, which adds its parser and sets `func(args) -> int`.

A FrostError (or an unreadable or unwritable file) from a command is one line on stderr and exit 2 (bad input),
never a traceback; a closed pipe
(`frost probe ... | head`) ends with one line on stderr and exit 141, the shell's code for SIGPIPE."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS = ("demo", "schema", "probe", "support_matrix", "bench", "cache")
EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    from frost import __version__

    parser = argparse.ArgumentParser(prog="frost", description="attention (SDPA) forward and backward for training on SM120-class NVIDIA GPUs")
    parser.add_argument("--version", action="version", version=f"frost {__version__}")
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
    from frost.errors import FrostError

    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()   # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except FrostError as exc:
        print(f"frost {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        _silence_stdout()
        print(f"frost {args.command}: output closed early (broken pipe)", file=sys.stderr)
        return EXIT_BROKEN_PIPE
    except OSError as exc:   # a file a command was told to read or write
        print(f"frost {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"frost {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush finds no closed pipe to complain about."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):   # stdout without a file descriptor (captured): nothing left to flush
        pass


if __name__ == "__main__":
    sys.exit(main())
