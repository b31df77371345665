"""FROST_* environment variables are read strictly: every accepted spelling means what the docs say, and any other
value raises SettingError naming the variable, the value and what is accepted, where a misspelt switch used to keep
its default without a word (FROST_CHECK_SEQ_LENS=off left the checks on)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
import torch

import frost
from frost import settings
from frost.errors import SettingError
from frost.lowering.disk_cache import active_disk_cache
from frost.lowering.engines.length_checks import check_mode


@pytest.mark.parametrize("text, expected", [("", True), ("1", True), ("On", True), (" yes ", True), ("TRUE", True),
                                            ("0", False), ("off", False), ("No", False), ("false", False)])
def test_a_switch_reads_every_documented_spelling(monkeypatch, text, expected):
    monkeypatch.setenv("FROST_GRAPH_REPLAY", text)
    assert settings.switch("FROST_GRAPH_REPLAY", True) is expected


@pytest.mark.parametrize("text, mode", [("", "deferred"), ("1", "deferred"), ("deferred", "deferred"),
                                        ("Sync", "sync"), ("0", "off"), ("off", "off"), ("no", "off")])
def test_the_length_check_modes(monkeypatch, text, mode):
    monkeypatch.setenv("FROST_CHECK_SEQ_LENS", text)
    assert check_mode() == mode


@pytest.mark.parametrize("variable, read", [
    ("FROST_GRAPH_REPLAY", lambda: settings.switch("FROST_GRAPH_REPLAY", True)),
    ("FROST_DISK_CACHE", active_disk_cache),
    ("FROST_CHECK_SEQ_LENS", check_mode),
])
@pytest.mark.parametrize("text", ["disable", "2", "of", "sync-ish"])
def test_a_misspelt_value_is_an_error_naming_the_variable(monkeypatch, variable, read, text):
    monkeypatch.setenv(variable, text)
    with pytest.raises(SettingError) as info:
        read()
    assert str(info.value).startswith(f"{variable}: got {text!r}; accepted: ")
    assert isinstance(info.value, ValueError) and isinstance(info.value, frost.FrostError)


def test_a_packed_call_reads_the_check_mode(monkeypatch):
    q = k = v = torch.randn(8, 2, 16)
    cu = torch.tensor([0, 5, 8], dtype=torch.int32)
    monkeypatch.setenv("FROST_CHECK_SEQ_LENS", "offf")
    with pytest.raises(SettingError, match="FROST_CHECK_SEQ_LENS: got 'offf'"):
        frost.sdpa_forward_varlen(q, k, v, cu, cu, 5, 5)
    monkeypatch.setenv("FROST_CHECK_SEQ_LENS", "off")
    frost.sdpa_forward_varlen(q, k, v, cu, cu, 5, 5)


@pytest.mark.parametrize("text, value", [("", 7), ("0", 0), ("12", 12), (" 3 ", 3)])
def test_a_count(monkeypatch, text, value):
    monkeypatch.setenv("FROST_PLAN_CACHE_SIZE", text)
    assert settings.count("FROST_PLAN_CACHE_SIZE", 7) == value


@pytest.mark.parametrize("text", ["abc", "-1", "2.5", "1e3"])
def test_a_count_refuses_what_is_not_a_whole_number(monkeypatch, text):
    monkeypatch.setenv("FROST_PLAN_CACHE_SIZE", text)
    with pytest.raises(SettingError, match=f"FROST_PLAN_CACHE_SIZE: got '{text}'; accepted: a whole number >= 0"):
        settings.count("FROST_PLAN_CACHE_SIZE", 7)


def test_the_plan_cache_size_is_read_when_frost_plans_its_first_call():
    """FROST_PLAN_CACHE_SIZE is read once, when frost's lowering is imported: a bad value fails there with the
    variable's name (it was a bare "invalid literal for int()")."""
    env = dict(os.environ, FROST_PLAN_CACHE_SIZE="lots")
    done = subprocess.run([sys.executable, "-c", "import frost.lowering"], env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "SettingError: FROST_PLAN_CACHE_SIZE: got 'lots'; accepted: a whole number >= 0" in done.stderr


def test_the_error_pickles():
    error = SettingError("FROST_DISK_CACHE", "nope", settings.SWITCH_ACCEPTED)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is SettingError and str(back) == str(error) and back.variable == "FROST_DISK_CACHE"
