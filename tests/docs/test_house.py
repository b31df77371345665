"""The shape of the package, checked from its source: no import circles between frost's modules, few loose modules
at the package root, and the layers' direction (ir -> analyzer -> lowering -> kernels; the analyzer and the IR never
import torch or cutlass).

An import edge is what a statement names: ``from a.b import c`` is an edge to module a.b.c when c is a module, else to
a.b; a package's own __init__ running first is not counted (Python imports parents, never a circle by itself), nor
an import under ``if TYPE_CHECKING:`` (it never runs)."""

from __future__ import annotations

import ast
import functools
import pathlib

import networkx as nx
import pytest

FROST = pathlib.Path(__file__).resolve().parents[2] / "frost"
MAX_LOOSE = 8


@functools.lru_cache(maxsize=1)
def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for path in FROST.rglob("*.py"):
        parts = path.relative_to(FROST.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _runtime_nodes(tree: ast.AST):
    """Every node of the tree but those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in (child, *_runtime_nodes(child)))
            continue
        yield node
        yield from _runtime_nodes(node)


def _edges(name: str, path: pathlib.Path, mods: dict[str, pathlib.Path]):
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield sub if sub in mods else base
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


@functools.lru_cache(maxsize=1)
def _imports() -> dict[str, tuple[str, ...]]:
    """Every module's imports, frost's and others' (parsed once)."""
    mods = _modules()
    return {name: tuple(_edges(name, path, mods)) for name, path in mods.items()}


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(_modules())
    for name, targets in _imports().items():
        graph.add_edges_from((name, t) for t in targets if t in graph and t != name)
    return graph


def test_no_import_circles():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, f"import circles: {cycles}"


def test_the_graph_sees_imports():
    """The check can fail: the public API's autograd module imports the functional calls."""
    assert import_graph().has_edge("frost.api.autograd", "frost.api.calls")


def test_few_loose_modules_at_the_root():
    loose = sorted(p.name for p in FROST.glob("*.py"))
    assert len(loose) <= MAX_LOOSE, loose


@pytest.mark.parametrize("layer", ["frost.ir", "frost.analyzer", "frost.spec", "frost.limits", "frost.errors"])
def test_the_lower_layers_import_no_torch_or_cutlass(layer):
    """The probe runs on any machine, fast: the IR and the analyzer (and the declarations they read) import neither
    torch nor cutlass, at any depth."""
    reached = {layer} | nx.descendants(import_graph(), layer)
    heavy = {m: [t for t in _imports()[m] if t.split(".")[0] in ("torch", "cutlass", "cuda")] for m in reached}
    assert not {m: t for m, t in heavy.items() if t}
