"""A kernel with ``bind`` (the real CompiledBackward) is bound to the plan's problem once, at lowering; each execute
then hands the bound launch one BackwardTensors of the plan's tensors, the workspace views and the optional inputs,
with no keyword call; through the real launches (backward and forward) the compiled entry gets their pointers."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

import frost.api.plans as api
from frost.errors import TensorError
from frost.lowering import FakeCompiler, use_compiler
from frost.lowering.engines.cute_compiler import CuteCompiler, is_forward_config
from helpers.graph_inputs import graph_inputs
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
    assert p.optional == {"seq_len_q", "seq_len_kv", "sink", "dsink"} and not p.deterministic
    assert len(compiler.calls) == 2
    call, _ = compiler.calls[-1]
    op = graph.sdpa_ops()[0]
    assert call.q is inputs[op.inputs.q] and call.lse is inputs[op.inputs.lse]
    assert set(call.workspace) >= {"dq_accum", "lse_log2", "delta", "dq_sem", "dsink_part"}  # the workspace views
    assert call.optional["seq_len_q"] is inputs[op.inputs.seq_len_q] and call.optional["sink"] is inputs[op.inputs.sink]
    assert tuple(call.optional["dsink"].shape) == (4,)                                                 # the dsink output


class RecordingEntries(CuteCompiler):
    """The real compiler's configs and binds (CompiledBackward's Launch, CompiledForward's BoundForward) over compiled
    entries that record their arguments under the jit parameters' names: the engine's whole host path on CPU
    tensors, down to the flat argument list."""

    device_type = "cpu"

    def __init__(self):
        super().__init__()
        self.name, self.calls = "recording-entries", []

    def compile(self, unit):
        from frost.kernels.backward.api import CompiledBackward
        from frost.kernels.backward.chain import BackwardChain
        from frost.kernels.backward.compile import CompiledKernels
        from frost.kernels.forward.api import CompiledForward
        from frost.kernels.forward.kernel import FwdKernel

        forward = is_forward_config(unit.config)
        params = list(inspect.signature((FwdKernel if forward else BackwardChain).__call__).parameters)[1:]

        def entry(*args):
            assert len(args) == len(params), (len(args), len(params))
            self.calls.append(dict(zip(params, args)))

        if forward:
            return CompiledForward(unit.config, kernel=SimpleNamespace(forward=entry))
        return CompiledBackward(unit.config, CompiledKernels(unit.config.key, entry, 0), selected=True)

    def serialize(self, kernel, unit):
        return None


def test_the_engines_launch_hands_the_compiled_entry_the_plans_pointers(monkeypatch):
    """An executed backward plan and forward plan reach their compiled entries with the caller's pointers (io
    tensors, lengths, sink, dsink, workspace regions) and the plan's sizes, each under its jit parameter."""
    from frost.ir import sdpa_forward_graph

    monkeypatch.setenv("FROST_CHECK_SEQ_LENS", "0")
    graph = small_graph(dtype="bfloat16")
    inputs, op = inputs_for(graph), graph.sdpa_ops()[0]
    with use_compiler("cute_sm120", RecordingEntries()) as compiler:
        plan = api.compile(graph, target="sm_120")
        ws = plan.new_workspace()
        # (a raw stream handle: there is no CUDA stream to ask for on this machine)
        tensors = inputs | plan.execute(inputs, workspace=ws, stream=7)
        (a,) = compiler.calls
        ins, outs = op.inputs, op.outputs
        for param, name in (("pQ", ins.q), ("pdO", ins.do), ("pLSE", ins.lse), ("pSeqKV", ins.seq_len_kv),
                            ("pSink", ins.sink), ("pdQ", outs.dq), ("pDsink", outs.dsink)):
            assert a[param] == tensors[name].data_ptr(), param
        assert a["pdQacc"] != 0 and a["pdQacc"] % 16 == 0 and a["pDelta"] % 16 == 0   # the workspace's regions
        assert (a["batch"], a["heads"], a["heads_kv"], a["seqlen_q"], a["seqlen_kv"]) == (2, 4, 2, 24, 24)
        assert (a["q_sb"], a["q_sh"], a["q_ss"]) == inputs[ins.q].stride()[:3] and a["stream"] == 7

        fwd = sdpa_forward_graph(2, 4, 24, 64, seq_kv=40, heads_kv=2, sink=True, padded=True, causal=True)
        fwd_inputs = graph_inputs(fwd, seed=0)
        fplan = api.compile(fwd, target="sm_120")
        outputs = fplan.new_outputs("cpu")
        fplan.execute(fwd_inputs | outputs, stream=7)
        f, fop = compiler.calls[-1], fwd.sdpa_ops()[0]
        for param, name in (("pQ", fop.inputs.q), ("pV", fop.inputs.v), ("pSeqQ", fop.inputs.seq_len_q),
                            ("pSink", fop.inputs.sink)):
            assert f[param] == fwd_inputs[name].data_ptr(), param
        assert (f["pO"], f["pLSE"]) == (outputs[fop.outputs.o].data_ptr(), outputs[fop.outputs.lse].data_ptr())
        assert (f["batch"], f["heads"], f["heads_kv"], f["seqlen_q"], f["seqlen_kv"]) == (2, 4, 2, 24, 40)


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
