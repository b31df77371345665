"""Loading a Python file that is not on the import path (a benchmark or an example script) as a module, the way a
test exercises its functions without running it as a program."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def load_script(path: Path, name: str | None = None):
    """The module of the file at `path` (named after the file unless `name` is given). It is registered in
    sys.modules while its body runs, as an import would (its dataclasses look their module up), and unregistered
    after, so that loading it again gives a fresh module."""
    name = name or Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
    return module
