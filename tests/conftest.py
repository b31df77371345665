"""Shared test setup: `gpu` tests skip unless torch sees a CUDA device; every test gets a private disk-cache
directory; a test that asks for `kernel_engine` gets the cute_sm120 host path with no-op kernels on the CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))   # tests/helpers: the helpers every test folder shares


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (on a machine with one: pytest -m gpu)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path, monkeypatch):
    """frost's disk cache (kernels, probe reports) goes to the test's own directory, never the user's."""
    monkeypatch.setenv("FROST_CACHE_DIR", str(tmp_path / "frost-cache"))


@pytest.fixture
def kernel_engine(monkeypatch):
    """CPU tensors planned for an SM120 target: the cute_sm120 engine's host path, compiled by the fake compiler
    into no-op kernels that record their launches (the fixture's value)."""
    import torch

    import frost.api.plans as targets
    from frost.lowering import FakeCompiler, use_compiler

    monkeypatch.setitem(targets._targets, torch.device("cpu"), "sm_120")
    with use_compiler("cute_sm120", FakeCompiler(persist=False)) as compiler:
        yield compiler
