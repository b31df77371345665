"""frost.compile: engine choice (probe, pin, fallback logging), plan caching, and its errors."""

import logging

import pytest

import frost
import frost.api.plans as api
from frost.analyzer import SupportReport, TargetError
from frost.errors import ArgumentTypeError, EngineError, NotSupported
from frost.ir import GraphBuilder, sdpa_backward_graph
from frost.lowering import cache_stats


def mha(seq=64, **kw):
    return sdpa_backward_graph(2, 4, seq, 64, dtype="bfloat16", causal=True, **kw)


def test_cpu_gets_the_reference_engine_and_plans_are_cached():
    plan = api.compile(mha(), target="cpu")
    assert plan.engine == "reference" and plan.report.ops[0].engine == "reference"
    assert api.compile(mha(), target="cpu") is plan          # an equal graph: same plan
    assert (cache_stats().hits, cache_stats().misses) == (1, 1)
    assert api.compile(mha(), target="cpu", engine="reference") is not plan


def test_compiling_a_graph_twice_returns_the_cached_plan():
    if not hasattr(frost, "compile"):
        pytest.skip("frost/__init__ does not export compile yet")
    graph = mha()
    assert frost.compile(graph, target="cpu") is frost.compile(graph, target="cpu")


def test_pinning_an_engine_that_declines_raises_with_the_report():
    with pytest.raises(NotSupported) as info:
        api.compile(mha(), target="cpu", engine="cute_sm120")
    assert isinstance(info.value.report, SupportReport) and "[target]" in str(info.value)


def test_pinning_reference_on_a_gpu_target_is_silent(caplog):
    with caplog.at_level(logging.WARNING, logger="frost"):
        assert api.compile(mha(), target="sm_120", engine="reference").engine == "reference"
    assert caplog.text == ""


def test_unknown_engine_and_target():
    """A caller's mistake, named as check_support names it (not NotSupported, which says a graph cannot run)."""
    for engine in ("triton", 3):
        with pytest.raises(EngineError, match=rf"^engine: got {engine!r}; accepted: 'cute_sm120' or 'reference'"):
            api.compile(mha(), target="cpu", engine=engine)
    with pytest.raises(TargetError):
        api.compile(mha(), target="sm_banana")


@pytest.mark.parametrize("entry", [frost.compile, frost.check_support])
@pytest.mark.parametrize("graph", [{"name": "g"}, "graph.json", GraphBuilder()])
def test_a_graph_argument_that_is_no_graph_is_named(entry, graph):
    with pytest.raises(ArgumentTypeError, match=rf"^graph: got '{type(graph).__name__}'; accepted: a frost\.Graph"):
        entry(graph)


def test_fallback_on_a_gpu_is_logged_once_per_reason(caplog):
    wide_v = dict(head_dim_v=128)                               # Dv > Dqk: cute_sm120 declines
    with caplog.at_level(logging.WARNING, logger="frost"):
        plan = api.compile(mha(**wide_v), target="sm_120")
        api.compile(mha(seq=128, **wide_v), target="sm_120")    # same reasons: not logged again
    assert plan.engine == "reference"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "cute_sm120 declines" in lines[0] and "[dv_gt_dqk]" in lines[0]
    with caplog.at_level(logging.WARNING, logger="frost"):
        api.compile(mha(head_dim_v=60), target="sm_120")        # a new reason: logged
    assert "[head_dim_multiple]" in caplog.records[-1].getMessage()


def test_ops_frost_does_not_claim_are_left_to_the_caller():
    """A graph with a matmul feeding q: the plan runs the attention backward; the matmul is the caller's."""
    import torch

    b = GraphBuilder("mixed")
    x = b.tensor("x", (2, 4, 8, 16), "float32")
    names = {n: b.tensor(n, (2, 4, 8, 16), "float32") for n in ("q", "k", "v", "o", "do")}
    lse = b.tensor("lse", (2, 4, 8), "float32")
    b.op("proj", "proj", inputs=(x,), outputs=(names["q"],))
    grads = b.sdpa_backward(*names.values(), lse, name="attn")
    plan = api.compile(b.build(), target="cpu")
    assert [op.op_name for op in plan.ops] == ["attn"] and plan.report.unclaimed[0].name == "proj"
    assert "left to the caller" in plan.describe()
    tensors = {n: torch.randn(2, 4, 8, 16) for n in [x, *names]} | {lse: torch.zeros(2, 4, 8)}
    assert set(plan.execute(tensors)) == {grads.dq, grads.dk, grads.dv}


def test_graph_without_attention():
    b = GraphBuilder("no_attention")
    x, y = b.tensor("x", (2, 2), "float32"), b.tensor("y", (2, 2), "float32")
    b.op("matmul", "mm", inputs=(x,), outputs=(y,))
    with pytest.raises(NotSupported, match="claims no op"):
        api.compile(b.build(), target="cpu")


def test_every_engine_the_probe_names_has_an_adapter():
    """compile checks an engine name against the probe's tables only (engines_named): each of them must lower."""
    from frost.analyzer.probe import engine_names
    from frost.lowering.engines import ADAPTERS

    assert set(engine_names()) == set(ADAPTERS)
