"""Shape-generic kernels: a training loop whose B and S change compiles once per compile key.

The cute_sm120 engine is forced with target="sm_120"; a fake compiler stands in for CuTe-DSL, so its "kernels" run
(as no-ops) on CPU tensors and the whole host path (probe, lowering, caches, executor) is exercised."""

import frost.api.plans as api
from frost.ir import sdpa_backward_graph
from frost.kernels.backward.api import choose_config, workspace_regions
from frost.lowering import ALIGN, FakeCompiler, cache_stats, use_compiler
from helpers.graph_inputs import graph_inputs

PAIRS = [(b, s) for b in (1, 2, 3, 4) for s in (1, 77, 128, 1000, 4097)]


class Recording(FakeCompiler):
    """Kernels that remember what they were launched with (shapes, the bound scale and workspace regions only)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def compile(self, unit):
        kernel, calls = super().compile(unit), self.calls

        class Bound:
            def bind(self, problem):
                kernel.bind(problem)

                def launch(call, stream=None, **options):   # a BackwardTensors: q k v o do lse dq dk dv, workspace
                    calls.append(([tuple(t.shape) for t in call[:9]], problem.scale,
                                  {n: v.nbytes for n, v in call.workspace.items()}))
                return launch

        return Bound()


def _run(plan):
    return plan.execute(graph_inputs(plan.graph), workspace=plan.new_workspace())


def test_twenty_batch_and_sequence_pairs_compile_once():
    with use_compiler("cute_sm120", Recording()) as compiler:
        keys = set()
        for b, s in PAIRS:
            plan = api.compile(sdpa_backward_graph(b, 4, s, 64, dtype="bfloat16", causal=True), target="sm_120")
            assert plan.engine == "cute_sm120"
            keys |= set(plan.compile_keys)
            _run(plan)
    stats = cache_stats()
    assert len(keys) == 1 and compiler.compiled == list(keys)
    assert (stats.compiles, stats.misses, stats.kernel_hits) == (1, len(PAIRS), len(PAIRS) - 1)


def test_runtime_features_share_a_kernel_and_dtypes_do_not(fake):
    def key(**kw):
        args = dict(dtype="bfloat16") | kw
        graph = sdpa_backward_graph(2, 4, 64, args.pop("d", 64), **args)
        return api.compile(graph, target="sm_120").compile_keys

    same = {key(), key(causal=True), key(causal=True, alignment="bottom_right"), key(d=56), key(layout="bshd")}
    assert len(same) == 1
    assert key(dtype="float16") != key() and key(d=128) != key()
    assert len(fake.compiled) == 3


def test_ordered_dq_problems_get_the_ordered_kernel_set(fake):
    """Deterministic mode and narrow bands add dQ in KV-tile order, on a kernel set compiled for it (its compile
    key says so): narrow bands, in either mode, on the narrow-band set where the pad has one (up to d128), else on the
    ordered set; wide bands and the default causal mode share the atomic set."""
    def kernel_key(d=64, **kw):   # a plan's compile key is engine|kernel set|features|signatures (lowering.keys)
        graph = sdpa_backward_graph(2, 4, 512, d, heads_kv=2, dtype="bfloat16", causal=True, **kw)
        (key,) = api.compile(graph, target="sm_120").compile_keys
        return key.split("|")[1]

    atomic, ordered = kernel_key(), kernel_key(deterministic=True)
    assert atomic.endswith(":o0") and ordered.endswith(":o1") and atomic[:-1] == ordered[:-1]
    narrow = kernel_key(band_left=128)
    assert narrow.endswith(":o1:nb") and kernel_key(band_left=128, deterministic=True) == narrow != ordered
    assert kernel_key(band_left=1024) == atomic
    d160 = kernel_key(160, band_left=128)   # (no narrow-band set at d160: the ordered set in both modes)
    assert d160.endswith(":o1") and d160 == kernel_key(160, band_left=128, deterministic=True)


def test_mha_problems_get_the_mha_kernel_set_where_one_exists(fake):
    """Problems without GQA run on a set compiled with catalogue.MHA_PTXAS where it has one (d64's atomic set, its
    tile with catalogue._MHA_CHANGES), else on the set every group shares."""
    from frost.kernels.backward.select import KernelKey, tile_key

    def kernel_key(d, heads_kv, **kw):
        graph = sdpa_backward_graph(2, 4, 512, d, heads_kv=heads_kv, dtype="bfloat16", causal=True, **kw)
        (key,) = api.compile(graph, target="sm_120").compile_keys
        return key.split("|")[1]

    shared, mha = (KernelKey("bfloat16", 64, "sm_120a", mha=m).tile for m in (False, True))
    assert kernel_key(64, 4) == kernel_key(64, 2).replace(tile_key(shared), tile_key(mha)) + ":mha"
    assert kernel_key(64, 1) == kernel_key(64, 2)
    assert kernel_key(64, 4, deterministic=True) == kernel_key(64, 2, deterministic=True)
    assert kernel_key(128, 4) == kernel_key(128, 2) and not kernel_key(128, 4).endswith(":mha")


def test_workspace_layout_and_launch():
    with use_compiler("cute_sm120", Recording()) as compiler:
        plan = api.compile(sdpa_backward_graph(3, 4, 77, 64, dtype="float16", causal=True), target="sm_120")
        out = _run(plan)
    want = dict(workspace_regions(choose_config("float16", 64, 64, True, "top_left", "sm_120a"), 3, 4, 77, 77))
    regions = {r.name: r for r in plan.ops[0].regions}
    assert {n: r.nbytes for n, r in regions.items()} == want
    assert all(r.offset % ALIGN == 0 for r in regions.values()) and plan.workspace_size % ALIGN == 0
    assert plan.workspace_size >= sum(want.values())
    assert plan.kernels[0].grid == (1, 4, 3)                         # ceil(77 / n_block=128) KV tiles, Hq, B
    (shapes, scale, workspace), = compiler.calls
    assert shapes == [(3, 4, 77, 64)] * 5 + [(3, 4, 77)] + [(3, 4, 77, 64)] * 3   # q k v o do lse dq dk dv
    assert scale == 64 ** -0.5 and workspace == want
    assert set(out) == {"attn.dq", "attn.dk", "attn.dv"}
