"""A kernel with ``bind`` (the real CompiledBackward) is bound to the plan's problem once, at lowering; each execute
then hands the bound launch one BackwardTensors of the plan's tensors, the workspace views and the optional inputs,
with no keyword call."""

from __future__ import annotations

import pytest

import frost.api.plans as api
from frost.errors import TensorError
from frost.lowering import FakeCompiler, use_compiler
from lowering_helpers import inputs_for, small_graph


class BindingCompiler(FakeCompiler):
    def __init__(self):
        super().__init__(persist=False)
        self.problems, self.calls = [], []

    def compile(self, unit):
        super().compile(unit)
        compiler = self

        class Kernel:
            def __call__(self, *args, **kwargs):
                raise AssertionError("the keyword entry must not be used when the kernel can bind")

            def bind(self, problem):
                compiler.problems.append(problem)
                return lambda tensors, stream=None, **options: compiler.calls.append((tensors, options))

        return Kernel()


def _run(graph, inputs, times=2):
    with use_compiler("cute_sm120", BindingCompiler()) as compiler:
        plan = api.compile(graph, target="sm_120")
        ws = plan.new_workspace()
        for _ in range(times):
            plan.execute(inputs, workspace=ws)
    return compiler


def test_bound_once_per_plan_and_called_with_the_plan_tensors(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    graph = small_graph(dtype="bfloat16")
    inputs = inputs_for(graph)
    compiler = _run(graph, inputs)
    (p,) = compiler.problems
    assert (p.batch, p.heads, p.heads_kv, p.seq_q, p.seq_kv) == (2, 4, 2, 24, 24)
    assert p.seq_len_q and p.seq_len_kv and p.sink and not p.deterministic
    assert len(compiler.calls) == 2
    call, _ = compiler.calls[-1]
    op = graph.sdpa_ops()[0]
    assert call.q is inputs[op.inputs.q] and call.lse is inputs[op.inputs.lse]
    assert set(call.workspace) >= {"dq_accum", "lse_log2", "delta", "dq_sem", "dsink_part"}  # the workspace views
    assert call.seq_len_q is inputs[op.inputs.seq_len_q] and call.sink is inputs[op.inputs.sink]
    assert tuple(call.dsink.shape) == (4,)                                                 # the dsink output


def test_bad_lengths_are_caught_before_the_launch(monkeypatch):
    monkeypatch.delenv("FROST_CHECK_SEQ_LENS", raising=False)
    graph = small_graph(dtype="bfloat16")
    inputs = inputs_for(graph)
    inputs[graph.sdpa_ops()[0].inputs.seq_len_kv][0] = 1000
    with pytest.raises(TensorError, match="seq_len_kv"):
        _run(graph, inputs, times=1)


@pytest.mark.parametrize("seq, deterministic, kind", [(4096, False, ":dqg"), (16384, False, ""),
                                                        (16384, True, "")])
def test_the_plan_compiles_the_set_its_problem_runs_on(seq, deterministic, kind):
    """d256 runs on its dq_gemm set in both modes while the dS workspace (B x H x S x S x 2 bytes) fits
    DQ_GEMM_MAX_BYTES (2 GiB); past it on the atomic set, or ordered in deterministic mode. The plan compiles, names
    and persists that set (not the dq_gemm set, with the launch compiling its twin in-process)."""
    from frost.ir import sdpa_backward_graph

    graph = sdpa_backward_graph(1, 16, seq, 256, dtype="bfloat16", layout="bshd", causal=True,
                                deterministic=deterministic)
    with use_compiler("cute_sm120", FakeCompiler(persist=False)) as compiler:
        plan = api.compile(graph, target="sm_120")
    (launch,) = plan.kernels
    assert compiler.compiled == [launch.compile_key]
    kernel_set = launch.compile_key.split("|")[1]      # engine | kernel set | mode | signatures
    assert kernel_set.endswith(f":o{int(deterministic and not kind)}{kind}"), kernel_set
