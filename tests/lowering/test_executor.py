"""The executor rejects each bad tensor with a TensorError naming the tensor, the value and what is accepted."""

import pytest
import torch

import frost.api.plans as api
from frost.analyzer import facts_for
from frost.errors import TensorError
from frost.lowering import Lowering, OpPlan, Plan
from frost.lowering.workspace import pack
from lowering_helpers import inputs_for, small_graph
from helpers.summation import assert_same_up_to_summation_order


@pytest.fixture
def plan():
    return api.compile(small_graph(), target="cpu")


@pytest.fixture
def good(plan):
    return inputs_for(plan.graph)


def _bshd_transposed_head(t):
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


BAD = {
    "q dtype": (lambda t: t | {"q": t["q"].double()}, "tensor 'q' (q of op 'attn').dtype", "torch.float32"),
    "q shape": (lambda t: t | {"q": t["q"][:, :, :-1]}, "'q' (q of op 'attn').shape", "(2, 4, 24, 16)"),
    "k device": (lambda t: t | {"k": t["k"].to("meta")}, "'k' (k of op 'attn').device: got 'meta'; accepted: cpu",
                 "one device per call"),
    "q head dim strided": (lambda t: t | {"q": _bshd_transposed_head(t["q"])}, "'q' (q of op 'attn').strides",
                           "head-dim stride 1"),
    "do broadcast": (lambda t: t | {"do": t["do"][:, :1].expand(-1, 4, -1, -1)}, "'do' (do of op 'attn').strides",
                     "no broadcast"),
    "seq_len int64": (lambda t: t | {"seq_len_q": t["seq_len_q"].long()}, "'seq_len_q' (seq_len_q of op 'attn').dtype",
                      "torch.int32"),
    "seq_len elements": (lambda t: t | {"seq_len_kv": t["seq_len_kv"].repeat(2)}, "'seq_len_kv'", "(2,)"),
    "sink dtype": (lambda t: t | {"sink": t["sink"].half()}, "'sink' (sink of op 'attn').dtype", "torch.float32"),
    "sink shape": (lambda t: t | {"sink": t["sink"][:2]}, "'sink' (sink of op 'attn').shape", "(4,)"),
    "dsink dtype": (lambda t: t | {"attn.dsink": torch.zeros(4, dtype=torch.float64)},
                    "'attn.dsink' (dsink of op 'attn').dtype", "torch.float32"),
    "dq shape": (lambda t: t | {"attn.dq": torch.zeros(2, 4, 24, 8)}, "'attn.dq' (dq of op 'attn').shape",
                 "(2, 4, 24, 16)"),
    "missing lse": (lambda t: {k: v for k, v in t.items() if k != "lse"}, "'lse' (lse of op 'attn')", "missing"),
    "not a tensor": (lambda t: t | {"v": t["v"].tolist()}, "'v' (v of op 'attn')", "a torch.Tensor"),
    "unknown name": (lambda t: t | {"dq": torch.zeros(1)}, "tensors: got ['dq']", "names of the graph's tensors"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_rejects_bad_tensor(plan, good, case):
    mutate, subject, accepted = BAD[case]
    with pytest.raises(TensorError) as info:
        plan.execute(mutate(dict(good)))
    assert subject in str(info.value) and accepted in str(info.value)


def test_accepts_other_strides_with_the_same_kernel_facts(plan, good):
    """A q sliced out of a longer buffer: different strides, same unit head dim -> accepted, same result."""
    big = torch.zeros(2, 40, 4, 16)
    sliced = big[:, 8:32].transpose(1, 2)
    sliced.copy_(good["q"])
    want = plan.execute(dict(good))
    got = plan.execute(good | {"q": sliced})
    for n in want:
        assert_same_up_to_summation_order(want[n], got[n], n)


def test_outputs_written_in_place(plan, good):
    outs = plan.new_outputs()
    result = plan.execute(good | outs)
    assert all(result[n] is outs[n] for n in outs) and outs["attn.dq"].abs().sum() > 0


def _workspace_plan(run):
    graph = small_graph()
    layout = pack([("attn/a", 100), ("attn/b", 1000)])
    regions = tuple(r.__class__(r.name.split("/")[1], r.offset, r.nbytes) for r in layout.regions)
    low = Lowering(kernels=(), workspace=(("a", 100), ("b", 1000)), run=run)
    return Plan(graph, "cpu", (OpPlan("attn", "test", facts_for(graph, "attn"), low, regions),), layout), graph


def test_caller_workspace_and_outputs_mean_no_allocation(monkeypatch):
    seen = {}
    plan, graph = _workspace_plan(lambda tensors, ws, stream: seen.update(ws))
    assert plan.workspace_size == 1280 and plan.workspace.region("attn/b").offset == 256
    tensors, ws = inputs_for(graph) | plan.new_outputs(), plan.new_workspace()

    def forbidden(*a, **k):
        raise AssertionError("execute allocated")

    for name in ("empty", "empty_strided", "zeros"):
        monkeypatch.setattr(torch, name, forbidden)
    plan.execute(tensors, workspace=ws)
    assert seen["b"].data_ptr() == ws.data_ptr() + 256 and seen["a"].nbytes == 100


@pytest.mark.parametrize("ws, message", [
    (torch.zeros(1280, dtype=torch.float32), "contiguous 1-D torch.uint8"),
    (torch.zeros(1000, dtype=torch.uint8), ">= plan.workspace_size = 1280"),
    (torch.zeros(2000, dtype=torch.uint8)[1:], "256-byte aligned"),
    (torch.zeros(1280, dtype=torch.uint8, device="meta"), "workspace.device"),
    ([0] * 1280, "a torch.Tensor of at least 1280 bytes"),
])
def test_rejects_bad_workspace(ws, message):
    plan, graph = _workspace_plan(lambda *a: None)
    with pytest.raises(TensorError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan.execute(inputs_for(graph), workspace=ws)


@pytest.mark.parametrize("stream", ["0", 1.0, True, torch.zeros(1)])
def test_rejects_a_stream_no_engine_can_launch_on(plan, good, stream):
    """Refused on every engine (the reference engine ignores streams; a kernel engine would fail converting it)."""
    with pytest.raises(TensorError, match=r"^stream: got .*; accepted: None \(the current stream\), a "
                                          r"torch\.cuda\.Stream"):
        plan.execute(good, stream=stream)


class _Handle:
    """A driver stream handle (cuda.CUstream converts to its raw value with int())."""

    def __int__(self) -> int:
        return 0


@pytest.mark.parametrize("stream", [None, 0, _Handle()])
def test_accepts_what_a_kernel_engine_can_launch_on(plan, good, stream):
    plan.execute(good, stream=stream)
