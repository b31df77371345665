"""frost ships py.typed, so its annotations are a promise to every user's type checker: mypy, with the settings in
pyproject.toml ([tool.mypy]: the public API's modules, strict), reports no error. The lazy names of `import frost`
are visible to type checkers too (a TYPE_CHECKING import per entry of the lazy table)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from readme_blocks import ROOT


@pytest.fixture(scope="module")
def mypy_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mypy's incremental cache, shared by this file's runs: under pytest's cache where there is one (a rerun then
    reads only what changed), else in a temporary directory."""
    cache = getattr(request.config, "cache", None)
    return cache.mkdir("mypy") if cache is not None else tmp_path_factory.mktemp("mypy")


def _mypy(cache: Path, *files: str) -> tuple[str, int]:
    """mypy's report and exit status, with the project's settings (over their files, or over `files`)."""
    from mypy import api

    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache),
                                      *files])
    return stdout + stderr, status


def test_mypy_reports_no_error(mypy_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)   # the config's files are relative to the repository root
    report, status = _mypy(mypy_cache)
    assert status == 0 and "Success: no issues found" in report, f"mypy reports errors:\n{report}"


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _type_checking_imports(tree: ast.Module) -> dict[str, str]:
    """name -> "module:attribute" (a module: "module:") of the imports under `if TYPE_CHECKING:`."""
    names: dict[str, str] = {}
    blocks = [n for n in tree.body if isinstance(n, ast.If) and isinstance(n.test, ast.Name)
              and n.test.id == "TYPE_CHECKING"]
    for node in (n for block in blocks for n in block.body):
        assert isinstance(node, ast.ImportFrom) and node.module is not None, ast.dump(node)
        for alias in node.names:
            dotted = f"{node.module}.{alias.name}"
            names[alias.asname or alias.name] = f"{dotted}:" if _is_module(dotted) else f"{node.module}:{alias.name}"
    return names


def test_lazy_names_are_visible_to_type_checkers() -> None:
    """Every lazily loaded name of frost has the TYPE_CHECKING import that types it, from the same place."""
    import frost

    tree = ast.parse((ROOT / "frost" / "__init__.py").read_text(encoding="utf-8"))
    assert _type_checking_imports(tree) == frost._LAZY


def test_a_users_mistakes_are_reported(mypy_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The annotations reach a user's code through `import frost`: frost.attention's return type follows
    return_lse, and a misspelt option value and a wrong argument type are errors."""
    user = tmp_path / "user_code.py"
    user.write_text("\n".join([
        "import torch", "import frost", "q = torch.zeros(1, 4, 2, 8)",
        "reveal_type(frost.attention(q, q, q, causal=True))",
        "reveal_type(frost.attention(q, q, q, return_lse=True))",
        "frost.sdpa_forward(q, q, q, causal_alignment='top-left')",
        "frost.sdpa_forward(q, q, 'v')", ""]), encoding="utf-8")
    monkeypatch.chdir(ROOT)
    report, status = _mypy(mypy_cache, str(user))
    # by file name: a warm cache reports an unchanged file under the path it had when it was checked
    found = [line.split(": ", 1)[1] for line in report.splitlines() if line.split(":", 1)[0].endswith(user.name)]
    assert status == 1 and found == [
        'note: Revealed type is "torch._tensor.Tensor"',
        'note: Revealed type is "tuple[torch._tensor.Tensor, torch._tensor.Tensor]"',
        'error: Argument "causal_alignment" to "sdpa_forward" has incompatible type "Literal[\'top-left\']"; '
        'expected "Literal[\'top_left\', \'bottom_right\']"  [arg-type]',
        'error: Argument 3 to "sdpa_forward" has incompatible type "str"; expected "Tensor"  [arg-type]',
    ], report
