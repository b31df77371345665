"""The kernel set is selected once, at plan time: for a sweep of problems (head dims, masks, GQA, deterministic
mode, padding, windows, dS workspaces that fit and do not) the real cute_sm120 compiler's plan names one set, and
the launch bound at lowering runs that very set: the same KernelKey and the same compiled kernels objects, with
no twin compiled. The kernels are stand-ins (no cutlass compile), everything above them is the real path."""

from __future__ import annotations

import itertools

import pytest

import frost.api.plans as api
from frost.ir import sdpa_backward_graph
from frost.kernels.backward import api as kernels_api
from frost.kernels.backward import ds_workspace
from frost.kernels.backward.compile import CompiledKernels
from frost.kernels.mask import FLAG_ORDERED_DQ
from frost.lowering import clear_caches, use_compiler
from frost.lowering.engines.cute_compiler import CuteCompiler

HEAD_DIMS = ((32, 32), (48, 48), (64, 64), (72, 72), (96, 96), (128, 128), (160, 160), (192, 128), (200, 200),
             (256, 256))
MASKS = ({"causal": False}, {"causal": True}, {"causal": True, "band_left": 128},
         {"causal": True, "band_left": 512}, {"causal": False, "band_left": 64, "band_right": 64})
HEADS_KV = (4, 2, 1)   # of 4 query heads: MHA, GQA, MQA


class NoCompile(CuteCompiler):
    """The real compiler's bind and config path over stand-in kernel sets (one per KernelKey, recorded)."""

    def __init__(self):
        super().__init__()
        self.name = "no-compile"
        self.sets: list[CompiledKernels] = []

    def serialize(self, kernel, unit):
        return None


class Recorded(kernels_api.Launch):
    made: list = []

    def __init__(self, kernels, cfg, p, graph_replay=None):
        super().__init__(kernels, cfg, p, graph_replay=False)
        Recorded.made.append((kernels, cfg, p, self.tail[-1]))


@pytest.fixture
def selected(monkeypatch):
    """(compiler, configs the plans selected) with stand-in kernels and a recording Launch."""
    compiler = NoCompile()

    def stand_in(key):
        compiler.sets.append(CompiledKernels(key, lambda *args: None, 0))
        return compiler.sets[-1]

    configs = []
    choose = kernels_api.choose_config
    monkeypatch.setattr(kernels_api, "get_kernels", stand_in)
    monkeypatch.setattr(kernels_api, "choose_config", lambda *a, **k: configs.append(choose(*a, **k)) or configs[-1])
    monkeypatch.setattr(kernels_api, "Launch", Recorded)
    Recorded.made = []
    with use_compiler("cute_sm120", compiler):
        yield compiler, configs


CASES = list(itertools.product(HEAD_DIMS, MASKS, HEADS_KV, (False, True), (False, True)))


@pytest.mark.parametrize("dims, mask, heads_kv, deterministic, padded", CASES[::3] + CASES[1::7])
def test_the_plans_key_is_the_launched_set(selected, dims, mask, heads_kv, deterministic, padded):
    compiler, configs = selected
    graph = sdpa_backward_graph(2, 4, 300, dims[0], head_dim_v=dims[1], heads_kv=heads_kv, seq_kv=260,
                                dtype="bfloat16", padded=padded, sink=padded, deterministic=deterministic, **mask)
    plan = api.compile(graph, target="sm_120")
    (cfg,), (kernels,), ((launched, launch_cfg, problem, flags),) = configs, compiler.sets, Recorded.made
    assert launched is kernels and kernels.key is cfg.key and launch_cfg is cfg        # the same objects
    (kernel_launch,) = plan.kernels
    assert kernel_launch.compile_key.split("|")[1] == cfg.key.as_str()                 # the plan names that set
    assert bool(flags & FLAG_ORDERED_DQ) == cfg.key.ordered
    assert (problem.heads, problem.heads_kv, problem.deterministic) == (4, heads_kv, deterministic)
    if deterministic:
        assert cfg.key.ordered or cfg.key.dq_gemm
    if cfg.key.mha:
        assert heads_kv == 4


@pytest.mark.parametrize("dims, deterministic", [((128, 128), True), ((160, 160), False), ((160, 160), True),
                                                 ((256, 256), False), ((96, 96), True)])
def test_a_problem_past_the_ds_workspace_is_planned_and_launched_on_another_set(selected, monkeypatch, dims,
                                                                                deterministic):
    """Where the dS workspace would pass DQ_GEMM_MAX_BYTES the plan selects the ordered (deterministic) or atomic
    set, and the launch runs that set, not the dq_gemm one."""
    compiler, configs = selected
    graph = sdpa_backward_graph(2, 4, 4096, dims[0], head_dim_v=dims[1], dtype="bfloat16", causal=True,
                                deterministic=deterministic)
    fits = api.compile(graph, target="sm_120")
    monkeypatch.setattr(ds_workspace, "DQ_GEMM_MAX_BYTES", ds_workspace.ds_workspace_bytes(2, 4, 4096, 4096) - 1)
    clear_caches()   # (the cap is read once per process: a plan made under another one is not reused)
    past = api.compile(graph, target="sm_120")
    assert [c.key.dq_gemm for c in configs] == [True, False]
    assert configs[1].key.ordered == deterministic
    assert [s.key for s in compiler.sets] == [c.key for c in configs]
    assert [m[0] for m in Recorded.made] == compiler.sets and [m[1] for m in Recorded.made] == configs
    assert fits.kernels[0].compile_key != past.kernels[0].compile_key
