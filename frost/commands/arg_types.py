"""argparse value types the commands share: a bad value becomes argparse's one-line error and exit 2, naming the
option, the value as typed and what is accepted."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Callable


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An integer option >= ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"got {text!r}; accepted: an integer >= {minimum}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"got {value}; accepted: an integer >= {minimum}")
        return value
    return parse


def seconds(text: str) -> float:
    """A time budget in seconds: a finite number >= 0 (0: no budget)."""
    accepted = "a number of seconds >= 0 (0: no budget)"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; accepted: {accepted}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"got {text!r}; accepted: {accepted}")
    return value


def directory(text: str) -> Path:
    """A directory option: a directory, or a path where none exists yet (never a file, nor an empty path, which
    would be the working directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"got {text!r}; accepted: a directory path (not empty)")
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"got {text!r}; accepted: a directory (this is a file)")
    return path
