"""Which backend applies to which case is decided from case facts alone (no GPU)."""

import pytest

from frost.bench import backends
from frost.bench.backends.fa4 import Fa4Backend
from frost.bench.cases import D256_DET, STANDARD, case, deterministic_twin

SINK = case("sink", 1, 8, 64, 64, hkv=2, causal=True, sink=True)
WINDOW = case("swa", 1, 8, 64, 64, causal=True, window=16)
GQA = case("gqa", 1, 8, 64, 128, hkv=2, causal=True)
D256 = case("d256", 1, 2, 64, 256, causal=True)
GQA_DET = deterministic_twin(GQA)


def by_name():
    return {b.name: b for b in backends.all_backends()}


def test_frost_applies_to_every_standard_and_d256_det_case():
    assert all(by_name()["frost"].applies(c) for c in STANDARD + D256_DET)


def test_only_torch_flash_times_a_deterministic_torch_backward():
    b = by_name()
    assert b["torch-flash"].applies(GQA_DET) and b["torch-flash"].applies(GQA_DET, "step")
    for name in ("torch-cudnn", "torch-efficient"):
        assert "deterministic" in b[name].declines(GQA_DET)
        assert "deterministic" in b[name].declines(GQA_DET, "step")
        assert b[name].applies(GQA_DET, "forward")       # the forward has no mode to switch


def test_fa4_sm120_declines_a_deterministic_backward_but_not_its_forward(monkeypatch):
    monkeypatch.delenv("FLASH_ATTENTION_ARCH", raising=False)
    fa4 = Fa4Backend()
    assert "deterministic" in fa4.declines(GQA_DET) and "deterministic" in fa4.declines(GQA_DET, "step")
    assert fa4.applies(GQA_DET, "forward")
    assert "sink" in fa4.declines(deterministic_twin(SINK))       # the sink rule still comes first
    monkeypatch.setenv("FLASH_ATTENTION_ARCH", "sm_90")
    assert fa4.applies(GQA_DET)


@pytest.mark.parametrize("name", ["torch-flash", "torch-cudnn", "torch-efficient"])
def test_torch_sdpa_declines_sink_and_window_but_takes_gqa(name):
    b = by_name()[name]
    assert "sink" in b.declines(SINK)
    assert "window" in b.declines(WINDOW)
    assert b.applies(GQA) and b.applies(D256)


def test_fa4_sm120_declines_sink_only(monkeypatch):
    monkeypatch.delenv("FLASH_ATTENTION_ARCH", raising=False)
    fa4 = Fa4Backend()
    assert "sink" in fa4.declines(SINK)
    assert fa4.applies(WINDOW) and fa4.applies(GQA) and fa4.applies(D256)


def test_fa4_declines_sink_on_every_arch(monkeypatch):
    """The backend passes no sink to FA4's kernels, so timing a sink case there would time other work."""
    monkeypatch.setenv("FLASH_ATTENTION_ARCH", "sm_90")
    assert "sink" in Fa4Backend().declines(SINK) and Fa4Backend().applies(GQA)


def test_only_frost_takes_every_optional_input():
    assert [name for name, b in by_name().items() if b.takes] == ["frost"]


def test_same_class_marks():
    marks = {n: b.same_class for n, b in by_name().items()}
    assert marks == {"frost": True, "torch-flash": True, "torch-cudnn": False, "torch-efficient": True, "fa4": True}


def test_select():
    assert [b.name for b in backends.select("fa4,frost")] == ["fa4", "frost"]
    assert len(backends.select(None)) == 5
    with pytest.raises(ValueError, match="unknown backend"):
        backends.select("frost,fa3")


def test_frost_passes_each_call_the_optional_inputs_it_reads():
    """frost's calls get the set's optional inputs by role, each call only those frost.spec says it reads."""
    from frost.bench.backends.frost_backend import DIFFERENTIABLE, by_caller, read_by

    given = {"sink": 1, "dlse": 2}
    assert read_by("forward", given) == {"sink": 1}
    assert read_by("backward", given) == given
    assert by_caller({"seq_len_q": 3}) == {"seq_len_q": 3}
    assert {"q", "k", "v", "sink"} <= DIFFERENTIABLE and "seq_len_q" not in DIFFERENTIABLE
