"""Every lowering test starts with empty caches, zeroed counters and a private disk-cache directory."""

from __future__ import annotations

import pytest

from frost.lowering import FakeCompiler, clear_caches, use_compiler


@pytest.fixture(autouse=True)
def fresh_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("FROST_CACHE_DIR", str(tmp_path / "kernel-cache"))
    monkeypatch.delenv("FROST_DISK_CACHE", raising=False)
    clear_caches(stats=True)
    yield
    clear_caches(stats=True)


@pytest.fixture
def fake():
    """The cute_sm120 engine with a fake compiler whose kernels run (do nothing) on CPU tensors."""
    with use_compiler("cute_sm120", FakeCompiler()) as compiler:
        yield compiler
