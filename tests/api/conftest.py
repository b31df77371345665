"""Every API test starts with empty caches, zeroed counters, a private disk-cache directory, and a fresh memory of
which engine fallbacks were already logged."""

from __future__ import annotations

import pytest

import frost.api.plans
from frost.lowering import clear_caches


@pytest.fixture(autouse=True)
def fresh_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("FROST_CACHE_DIR", str(tmp_path / "kernel-cache"))
    clear_caches(stats=True)
    frost.api.plans._logged.clear()
    yield
    clear_caches(stats=True)
