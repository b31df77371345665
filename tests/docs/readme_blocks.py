"""README code blocks are files: each block sits between two markers naming its file under examples/, so the file is
what tests run and the README shows the same text.

    python3 tests/docs/readme_blocks.py           # rewrite README.md's example blocks from the files
    python3 tests/docs/readme_blocks.py --check   # exit 1 when a block differs from its file
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FENCE_LANGUAGE = {".py": "python", ".sh": "bash"}
EXAMPLE = re.compile(r"<!-- BEGIN EXAMPLE (?P<path>\S+) -->\n(?P<body>.*?)<!-- END EXAMPLE (?P=path) -->\n", re.S)
FENCE = re.compile(r"^```", re.M)


def fenced(path: str, root: Path = ROOT) -> str:
    """The README form of an example file: its whole text in a fence of its language."""
    file = root / path
    return f"```{FENCE_LANGUAGE[file.suffix]}\n{file.read_text(encoding='utf-8')}```\n"


def examples_in(text: str) -> dict[str, str]:
    """Example path -> the block between its markers, in README order."""
    return {m["path"]: m["body"] for m in EXAMPLE.finditer(text)}


def fences_outside_examples(text: str) -> list[int]:
    """Line numbers of code fences that no example marker pair encloses (a block no test runs)."""
    inside = [(m.start(), m.end()) for m in EXAMPLE.finditer(text)]
    return [text.count("\n", 0, f.start()) + 1 for f in FENCE.finditer(text)
            if not any(a <= f.start() < b for a, b in inside)]


def synced(text: str, root: Path = ROOT) -> str:
    """``text`` with every example block replaced by its file's current text."""
    return EXAMPLE.sub(lambda m: f"<!-- BEGIN EXAMPLE {m['path']} -->\n{fenced(m['path'], root)}"
                                 f"<!-- END EXAMPLE {m['path']} -->\n", text)


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    fresh = synced(text)
    if "--check" in argv:
        if fresh != text:
            print("README.md: an example block differs from its file; run python3 tests/docs/readme_blocks.py",
                  file=sys.stderr)
        return int(fresh != text)
    if fresh != text:
        README.write_text(fresh, encoding="utf-8")
        print(f"wrote {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
