"""How wide the house is, counted the same way each time (no GPU needed):

- files under frost/ whose code names a word (``sink``; ``band`` or ``window``): once over the whole text, once
  over the code alone (comments and docstrings left out);
- files under frost/ whose *functions* run during a ``frost.attention`` call and its backward, first and cached
  (module and class bodies, i.e. import-time code, left out; lowering/fake.py, the test compiler that stands in for
  the compiled kernels here, left out).

    python3 benchmarks/tools/house_counts.py [-v]      # -v: list the files"""

from __future__ import annotations

import ast
import inspect
import io
import os
import pathlib
import re
import sys
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
WORDS = {"sink": re.compile("sink", re.I), "band/window": re.compile("band|window", re.I)}


def code_text(src: str) -> str:
    """The source without its comments and docstrings."""
    doc_lines: set[int] = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                doc_lines.update(range(first.lineno, first.end_lineno + 1))
    return " ".join(tok.string for tok in tokenize.generate_tokens(io.StringIO(src).readline)
                    if tok.type != tokenize.COMMENT and tok.start[0] not in doc_lines)


def naming_files(pattern: re.Pattern) -> tuple[list[str], list[str]]:
    """(files whose text names it, files whose code names it)."""
    anywhere, in_code = [], []
    for path in sorted((ROOT / "frost").rglob("*.py")):
        src = path.read_text(encoding="utf-8")
        name = str(path.relative_to(ROOT))
        if pattern.search(src):
            anywhere.append(name)
        if pattern.search(code_text(src)):
            in_code.append(name)
    return anywhere, in_code


def _import_time(frame) -> bool:
    """A comprehension or generator expression run by a module or class body (import-time code too)."""
    while frame is not None and frame.f_code.co_name.startswith("<") and frame.f_code.co_flags & inspect.CO_OPTIMIZED:
        frame = frame.f_back
    return frame is not None and not frame.f_code.co_flags & inspect.CO_OPTIMIZED


def files_entered(call) -> list[str]:
    """The frost files whose functions run during ``call()``."""
    files: set[str] = set()

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_flags & inspect.CO_OPTIMIZED and "/frost/" in code.co_filename \
                and not code.co_filename.endswith(os.path.join("lowering", "fake.py")) and not _import_time(frame):
            files.add(code.co_filename.split("/frost/", 1)[1])

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return sorted(files)


def call_paths() -> dict[str, list[str]]:
    """Files entered by a first and a cached frost.attention forward and backward (GQA 4:2, causal, bf16, on the
    CPU with sm_120 as the target and the test compiler). "First" is a new user's first call: the disk cache is an
    empty temporary folder, so the count does not depend on what earlier runs left there."""
    import tempfile
    from unittest import mock

    with tempfile.TemporaryDirectory() as cache_dir, mock.patch.dict(os.environ, {"FROST_CACHE_DIR": cache_dir}):
        return _call_paths()


def _call_paths() -> dict[str, list[str]]:
    import torch

    import frost
    import frost.api.plans as targets
    from frost.lowering import FakeCompiler, use_compiler

    targets._targets[torch.device("cpu")] = "sm_120"
    q, k, v = (torch.randn(2, 64, h, 64).bfloat16().requires_grad_() for h in (4, 2, 2))
    with use_compiler("cute_sm120", FakeCompiler(persist=False)):
        forward = lambda: frost.attention(q, k, v, causal=True)   # noqa: E731
        paths = {"first forward": files_entered(forward), "cached forward": files_entered(forward)}
        out = frost.attention(q, k, v, causal=True)
        backward = lambda: out.sum().backward(retain_graph=True)   # noqa: E731
        paths["first backward"] = files_entered(backward)
        paths["cached backward"] = files_entered(backward)
    return paths


def main() -> None:
    verbose = "-v" in sys.argv
    for word, pattern in WORDS.items():
        anywhere, in_code = naming_files(pattern)
        print(f"files naming {word}: {len(in_code)} in code, {len(anywhere)} in any text")
        if verbose:
            print("  " + "\n  ".join(in_code))
    for name, files in call_paths().items():
        print(f"{name}: {len(files)} files entered")
        if verbose:
            print("  " + "\n  ".join(files))


if __name__ == "__main__":
    main()
