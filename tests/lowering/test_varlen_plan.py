"""Packed (ragged) graphs through the plan: the reference engine runs them on CPU, the cute_sm120 engine on a GPU
target (its packed kernel set), the executor checks ragged tensors and int32 offsets like any other tensor, and
signatures read a ragged tensor's heads and head dim without its token count."""

from __future__ import annotations

import pytest
import torch

import frost.api.plans as api
from frost.errors import TensorError
from frost.ir import sdpa_backward_graph, sdpa_backward_varlen_graph, sdpa_forward_varlen_graph
from frost.lowering import spec_signature
from frost.lowering.keys import op_signatures
from frost.reference import attention_backward_varlen, attention_forward_varlen
from helpers.graph_inputs import graph_inputs
from helpers.summation import assert_same_up_to_summation_order

CU = [0, 7, 7, 20, 26]          # 4 sequences (one empty) over 26 of the 30 tokens
USED = [5, 0, 13, 2]
MASK = dict(causal=True, alignment="bottom_right", band_left=6)


def graph(dtype="float64"):
    return sdpa_backward_varlen_graph(4, 4, 30, 13, 16, heads_kv=2, head_dim_v=8, dtype=dtype, sink=True,
                                      seqused=True, dlse=True, **MASK)


def inputs(g, seed=0) -> dict:
    """Random tensors with each graph input's declared shape and strides; offsets CU, seqused USED."""
    return graph_inputs(g, seed=seed, lengths=lambda spec: CU if spec.name.startswith("cu_") else USED)


def test_the_reference_engine_runs_a_packed_backward():
    g = graph()
    plan = api.build_plan(g, "cpu")
    t = inputs(g)
    got = plan.execute(dict(t))
    want = attention_backward_varlen(t["q"], t["k"], t["v"], t["o"], t["do"], t["lse"], t["cu_seqlens_q"],
                                     t["cu_seqlens_kv"], seqused_q=t["seq_len_q"], seqused_kv=t["seq_len_kv"],
                                     sink=t["sink"], dlse=t["dlse"], **MASK)
    for name, w in zip(("attn.dq", "attn.dk", "attn.dv", "attn.dsink"), want):
        assert torch.equal(got[name], w.to(got[name].dtype)), name
    assert got["attn.dq"].stride() == g.tensor("attn.dq").effective_strides
    assert torch.all(got["attn.dq"][:, 26:] == 0) and torch.all(got["attn.dk"][:, 26:] == 0)


def test_the_reference_engine_runs_a_packed_forward():
    g = sdpa_forward_varlen_graph(4, 4, 30, 13, 16, heads_kv=2, dtype="float64", sink=True, seqused=True, **MASK)
    t = inputs(g)
    got = api.build_plan(g, "cpu").execute(dict(t))
    o, lse = attention_forward_varlen(t["q"], t["k"], t["v"], t["cu_seqlens_q"], t["cu_seqlens_kv"],
                                      seqused_q=t["seq_len_q"], seqused_kv=t["seq_len_kv"], sink=t["sink"], **MASK)
    assert torch.equal(got["attn.o"], o) and torch.equal(got["attn.lse"], lse.float())
    assert got["attn.lse"].dtype == torch.float32 and torch.all(got["attn.lse"][:, 26:] == float("-inf"))


def test_one_packed_sequence_is_the_dense_batch_of_one():
    """An independent check of the wiring: a packed batch holding one sequence equals the dense plan's B = 1."""
    packed = sdpa_backward_varlen_graph(1, 4, 24, 24, 16, heads_kv=2, dtype="float64", sink=True, causal=True)
    dense = sdpa_backward_graph(1, 4, 24, 16, heads_kv=2, dtype="float64", sink=True, causal=True)
    t = inputs(dense)
    got_dense = api.build_plan(dense, "cpu").execute(dict(t))
    cu = torch.tensor([0, 24], dtype=torch.int32)
    p = {n: t[n][0] for n in ("q", "k", "v", "o", "do")} | {"lse": t["lse"][0], "sink": t["sink"]}
    got = api.build_plan(packed, "cpu").execute(p | {"cu_seqlens_q": cu, "cu_seqlens_kv": cu})
    for name in ("attn.dq", "attn.dk", "attn.dv", "attn.dsink"):
        want = got_dense[name][0] if name != "attn.dsink" else got_dense[name]
        torch.testing.assert_close(got[name], want, rtol=1e-12, atol=1e-12)


def test_a_gpu_target_lowers_packed_ops_to_the_kernels(fake):
    """On a GPU target the cute_sm120 engine serves packed ops: the packed kernel set (its compile key says
    varlen), a dQ accumulator of Tq rows, and each call passes the offsets as the launch's cu_seqlens."""
    from frost.kernels.backward.launch import Problem
    from frost.limits import packed_acc_rows

    g = graph("bfloat16")
    plan = api.build_plan(g, "sm_120")
    assert plan.engine == "cute_sm120"
    assert ":vl" in plan.kernels[0].compile_key
    (kernel,) = fake.kernels
    (problem,) = kernel.problems
    assert isinstance(problem, Problem) and (problem.batch, problem.seq_q, problem.tokens_q) == (4, 13, 30)
    (acc,) = [r for r in plan.workspace.regions if r.name.endswith("dq_accum")]
    assert acc.nbytes == 4 * packed_acc_rows(30, 4) * 32 * 4   # Hq x rows x head-dim pad x fp32
    t = inputs(plan.graph)
    plan.execute(dict(t))
    (call, _) = kernel.launches[-1]
    assert call.packed.cu_seqlens_q is t["cu_seqlens_q"] and call.packed.cu_seqlens_kv is t["cu_seqlens_kv"]


def test_a_gpu_target_lowers_packed_forwards_to_the_packed_kernel(fake):
    """The packed forward: its config is the varlen one, and each call passes the segments (offsets and the plan's
    max_len) to the kernel."""
    g = sdpa_forward_varlen_graph(4, 4, 30, 13, 16, heads_kv=2, dtype="bfloat16", sink=True, seqused=True, **MASK)
    plan = api.build_plan(g, "sm_120")
    assert plan.engine == "cute_sm120" and ":vl" in plan.kernels[0].compile_key
    assert plan.kernels[0].grid[1:] == (4, 4)
    t = inputs(plan.graph)
    plan.execute(dict(t))
    (kernel,) = fake.kernels
    call, _ = kernel.launches[-1]
    packed = call.packed
    assert packed.cu_seqlens_q is t["cu_seqlens_q"] and (packed.max_seqlen_q, packed.max_seqlen_kv) == (13, 13)
    assert call.optional["seq_len_q"] is t["seq_len_q"] and call.optional["sink"] is t["sink"]


@pytest.mark.parametrize("kind", ("forward", "backward"))
def test_a_packed_plans_token_major_run_launches_what_execute_does(fake, kind):
    """The functional API's hot path (Plan.run_trusted_seq_major) hands the kernel the (T, H, D) tensors as given
    with seq_major set (the launch reads their strides in that order: kernels/test_forward_launch.py shows the
    arguments equal the logical views'), and everything else as plan.execute on the logical (H, T, D) views."""
    g = graph("bfloat16") if kind == "backward" else sdpa_forward_varlen_graph(
        4, 4, 30, 13, 16, heads_kv=2, dtype="bfloat16", sink=True, seqused=True, **MASK)
    plan = api.build_plan(g, "sm_120")
    assert plan.run_trusted_seq_major is not None
    t = inputs(plan.graph) | plan.new_outputs("cpu")
    plan.execute(dict(t))
    token_major = {n: (x.transpose(0, 1) if x.dim() == 3 else x) for n, x in t.items()}
    plan.run_trusted_seq_major(token_major, torch.device("cpu"))
    (kernel,) = fake.kernels
    (call_a, opt_a), (call_b, opt_b) = kernel.launches[-2:]

    def meta(x):
        return (x.data_ptr(), tuple(x.shape), x.stride()) if isinstance(x, torch.Tensor) else x

    ins, outs = plan.graph.sdpa_ops()[0].inputs, plan.graph.sdpa_ops()[0].outputs
    io = (ins.q, ins.k, ins.v, outs.o, outs.lse) if kind == "forward" else (ins.q, ins.k, ins.v, ins.o, ins.do,
                                                                          ins.lse)
    rest = 5 if kind == "forward" else 10     # the forward's optional inputs and segments; the backward's
    assert [meta(x) for x in call_b[:len(io)]] == [meta(token_major[n]) for n in io]
    assert [meta(x) for x in call_a[rest:]] == [meta(x) for x in call_b[rest:]]
    assert opt_b.pop("seq_major") is True and opt_a.pop("seq_major") is False
    assert opt_a == opt_b


def test_an_engine_without_ragged_declines_with_the_ragged_reason():
    """An engine whose table lacks ragged declines a packed op with that reason; the reference serves it."""
    import dataclasses

    from frost.analyzer import probe
    from frost.analyzer.capability import CUTE_SM120, REFERENCE

    report = probe(graph("bfloat16"), "sm_120", engines=(dataclasses.replace(CUTE_SM120, ragged=False), REFERENCE))
    assert report.ops[0].engine == "reference"
    assert [r.code for r in report.ops[0].declined["cute_sm120"]] == ["ragged"]


BAD = {
    "tokens": (lambda t: t | {"q": t["q"][:, :-1]}, "'q' (q of op 'attn').shape", "(4, 30, 16)"),
    "offsets int64": (lambda t: t | {"cu_seqlens_q": t["cu_seqlens_q"].long()},
                      "'cu_seqlens_q' (cu_seqlens_q of op 'attn').dtype", "torch.int32"),
    "offsets extent": (lambda t: t | {"cu_seqlens_kv": t["cu_seqlens_kv"][:-1]},
                       "'cu_seqlens_kv' (cu_seqlens_kv of op 'attn').shape", "(5,)"),
    "missing offsets": (lambda t: {k: v for k, v in t.items() if k != "cu_seqlens_kv"},
                        "'cu_seqlens_kv' (cu_seqlens_kv of op 'attn')", "missing"),
    "lse broadcast": (lambda t: t | {"lse": t["lse"][:1].expand(4, -1)}, "'lse' (lse of op 'attn').strides",
                      "no broadcast"),
    "k device": (lambda t: t | {"k": t["k"].to("meta")}, "'k' (k of op 'attn').device", "cpu"),
    "dq dtype": (lambda t: t | {"attn.dq": torch.zeros(4, 30, 16, dtype=torch.float32)},
                 "'attn.dq' (dq of op 'attn').dtype", "torch.float64"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_executor_checks_ragged_tensors(case):
    mutate, subject, accepted = BAD[case]
    g = graph()
    plan = api.build_plan(g, "cpu")
    t = inputs(g)
    plan.execute(dict(t))    # the unbroken call runs
    with pytest.raises(TensorError) as info:
        plan.execute(mutate(dict(t)))
    assert subject in str(info.value) and accepted in str(info.value), str(info.value)


def test_other_token_strides_are_accepted():
    """A head-major (H, T, D) q instead of the planned packed THD one: the reference engine takes any strides."""
    g = graph()
    plan = api.build_plan(g, "cpu")
    t = inputs(g)
    want = plan.execute(dict(t))["attn.dq"]
    assert_same_up_to_summation_order(plan.execute(t | {"q": t["q"].contiguous()})["attn.dq"], want, "dq")


def test_signatures_read_heads_and_head_dim_but_not_tokens():
    def packed(tokens, max_len):
        return sdpa_backward_varlen_graph(4, 4, tokens, max_len, 16, heads_kv=2, head_dim_v=8, dtype="float32",
                                          sink=True, seqused=True, dlse=True, **MASK)
    small, large = packed(32, 13), packed(5000, 2000)
    q = spec_signature(small.tensor("q"))
    assert (q.heads, q.head_dim, q.rank, q.stride_order) == (4, 16, 3, (1, 0, 2))
    assert spec_signature(small.tensor("lse")).heads == 4
    assert [spec_signature(large.tensor(n)) for n in ("q", "k", "lse")] == \
        [spec_signature(small.tensor(n)) for n in ("q", "k", "lse")]
    op = small.sdpa_ops()[0]
    assert len(op_signatures(small, op)) == 8          # q, k, v, o, do, dq, dk, dv


def test_the_plan_key_names_the_packed_op():
    plan = api.build_plan(graph(), "cpu")
    (key,) = plan.compile_keys
    assert key.startswith("reference|varlen|")
