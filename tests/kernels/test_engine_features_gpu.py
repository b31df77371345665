"""The cute_sm120 engine adapter with every issue-6 feature at once -- GQA + padding + band + sink (+ deterministic)
-- through frost.compile, against the fp64 reference under the FA rule (kernel_oracle.py). GPU machine only."""

import pytest

torch = pytest.importorskip("torch")

from helpers.fa_rule import FLOOR, NOISE  # noqa: E402

pytestmark = pytest.mark.gpu

DT = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32, "int32": torch.int32}


def _random_inputs(plan, seed):
    """The plan's op and its input tensors on the GPU in the plan's strides, floats drawn from N(0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    op = plan.graph.sdpa_ops()[0]
    t = {}
    for spec in plan.graph.tensors:
        if spec.name in op.output_names():
            continue
        x = torch.empty_strided(spec.shape, spec.effective_strides, dtype=DT[spec.dtype], device="cuda")
        if spec.dtype != "int32":
            x.copy_(torch.randn(spec.shape, generator=gen))
        t[spec.name] = x
    return op, t


def _inputs(plan, lens_q, lens_kv):
    from frost.reference import attention_forward

    op, t = _random_inputs(plan, 0)
    ins = op.inputs
    t[ins.seq_len_q].copy_(torch.tensor(lens_q))
    t[ins.seq_len_kv].copy_(torch.tensor(lens_kv))
    o, lse = attention_forward(t[ins.q].double(), t[ins.k].double(), t[ins.v].double(), causal=op.causal,
                               alignment=op.alignment, band_left=op.band_left, band_right=op.band_right,
                               sink=t[ins.sink].double(), seq_len_q=t[ins.seq_len_q], seq_len_kv=t[ins.seq_len_kv])
    t[ins.o].copy_(o)
    t[ins.lse].copy_(lse)
    return op, t


def _reference(op, t, dtype):
    from frost.reference import attention_backward

    ins = op.inputs
    conv = {n: (x.to(dtype) if x.is_floating_point() and dtype == torch.float64 else x) for n, x in t.items()}
    return attention_backward(conv[ins.q], conv[ins.k], conv[ins.v], conv[ins.o], conv[ins.do], conv[ins.lse],
                              causal=op.causal, alignment=op.alignment, band_left=op.band_left,
                              band_right=op.band_right, sink=conv[ins.sink], seq_len_q=t[ins.seq_len_q],
                              seq_len_kv=t[ins.seq_len_kv])


@pytest.mark.parametrize("det", (False, True), ids=("default", "deterministic"))
def test_engine_serves_every_feature_at_once(det):
    import frost.api.plans as api
    from frost.ir import sdpa_backward_graph

    graph = sdpa_backward_graph(2, 8, 300, 64, heads_kv=2, seq_kv=260, sink=True, padded=True, causal=True,
                                alignment="bottom_right", band_left=64, band_right=16, deterministic=det)
    plan = api.compile(graph, engine="cute_sm120")
    assert plan.engine == "cute_sm120", plan.report.to_text()
    op, t = _inputs(plan, [300, 211], [260, 97])
    outs, ws = plan.new_outputs("cuda"), plan.new_workspace("cuda")
    plan.execute(t | outs, workspace=ws)
    torch.cuda.synchronize()
    exact, low = _reference(op, t, torch.float64), _reference(op, t, None)
    names = ("dq", "dk", "dv", "dsink")
    scale = max(e.abs().max().item() for e in exact[:3])
    failed = []
    for name, e, lo in zip(names, exact, low):
        got = outs[getattr(op.outputs, name)]
        err = (got.double() - e).abs().max().item()
        bar = 2 * (lo.double() - e).abs().max().item() + FLOOR * e.abs().max().item() + NOISE * scale
        if not err <= bar:
            failed.append((name, err, bar))
    assert not failed, failed


def test_graph_replay_matches_direct_launch(monkeypatch):
    """A plan's launch replays a CUDA graph from the second call with the same tensors (frost.kernels.graph_replay):
    in deterministic mode its outputs equal the first, direct launch's bit for bit. Inside the caller's own CUDA
    graph capture the kernels are launched directly (and so recorded), and replaying that graph gives the same."""
    import frost.api.plans as api
    from frost.ir import sdpa_backward_graph
    from frost.kernels.graph_replay import CudaGraphDriver

    graph_launches, real_launch = [], CudaGraphDriver.launch

    def counted_launch(self, graph_exec, stream):
        graph_launches.append(stream)
        real_launch(self, graph_exec, stream)

    monkeypatch.setattr(CudaGraphDriver, "launch", counted_launch)
    graph = sdpa_backward_graph(2, 8, 300, 64, heads_kv=2, seq_kv=260, sink=True, causal=True,
                                alignment="bottom_right", band_left=64, band_right=16, deterministic=True)
    plan = api.compile(graph, engine="cute_sm120")
    assert plan.engine == "cute_sm120", plan.report.to_text()
    op, t = _inputs_dense(plan)
    outs, ws = plan.new_outputs("cuda"), plan.new_workspace("cuda")
    results = []
    for _ in range(3):   # direct, captured + replayed, replayed
        for x in outs.values():
            x.fill_(7.0)
        plan.execute(t | outs, workspace=ws)
        torch.cuda.synchronize()
        results.append({n: x.clone() for n, x in outs.items()})
    assert len(graph_launches) == 2
    for later in results[1:]:
        assert all(torch.equal(results[0][n], later[n]) for n in outs)

    side = torch.cuda.Stream()
    user_graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        user_graph.capture_begin()
        plan.execute(t | outs, workspace=ws)
        user_graph.capture_end()
    torch.cuda.current_stream().wait_stream(side)
    assert len(graph_launches) == 2     # nothing replayed into the caller's capture
    for x in outs.values():
        x.fill_(7.0)
    user_graph.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(results[0][n], outs[n]) for n in outs)


def _inputs_dense(plan):
    """Random inputs for a plan without per-batch lengths (O and LSE need not be a real forward's here)."""
    op, t = _random_inputs(plan, 1)
    t[op.inputs.lse].abs_().add_(4.0)   # finite, positive log-sum-exps keep P bounded
    return op, t
