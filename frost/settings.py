"""frost's FROST_* environment variables, parsed in one place and strictly: a value that is none of the accepted
spellings raises SettingError naming the variable, where a misspelt switch used to keep its default silently
(docs/configuration.md lists the variables)."""

from __future__ import annotations

import os
from typing import Mapping, TypeVar

from frost.errors import SettingError

T = TypeVar("T")

ON = ("1", "on", "true", "yes")
OFF = ("0", "off", "false", "no")
SWITCH_ACCEPTED = "one of 1, on, true, yes (on) or 0, off, false, no (off), any case"
_SWITCH_WORDS = {**dict.fromkeys(ON, True), **dict.fromkeys(OFF, False)}


def switch(variable: str, default: bool) -> bool:
    """An on/off variable; unset or empty: ``default``."""
    return choice(variable, default, _SWITCH_WORDS, SWITCH_ACCEPTED)


def choice(variable: str, default: T, words: Mapping[str, T], accepted: str) -> T:
    """A variable with named values: ``words`` maps each accepted spelling (lower case) to the value it means;
    unset or empty: ``default``."""
    text = os.environ.get(variable, "")
    word = text.strip().lower()
    if not word:
        return default
    if word not in words:
        raise SettingError(variable, text, accepted)
    return words[word]


def count(variable: str, default: int, minimum: int = 0) -> int:
    """A whole number >= ``minimum``; unset or empty: ``default``."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1   # refused below, with the same words
    if value < minimum:
        raise SettingError(variable, text, f"a whole number >= {minimum}")
    return value


__all__ = ["OFF", "ON", "SWITCH_ACCEPTED", "choice", "count", "switch"]
