"""The cute_sm120 engine adapter with every seed feature at once -- GQA + padding + band + sink (+ deterministic)
-- through frost.compile, against the fp64 oracle under the FA rule (helpers/fa_rule.py). GPU machine only."""

import pytest

torch = pytest.importorskip("torch")

from frost import reference  # noqa: E402
from helpers import oracle  # noqa: E402
from helpers.fa_rule import fa_rule_each  # noqa: E402
from helpers.graph_inputs import graph_inputs  # noqa: E402

pytestmark = pytest.mark.gpu


def _random_inputs(plan, seed):
    """The plan's op and its input tensors on the GPU in the plan's strides, floats drawn from N(0, 1)."""
    return plan.graph.sdpa_ops()[0], graph_inputs(plan.graph, seed=seed, device="cuda")


def _inputs(plan, lens_q, lens_kv):
    """Random inputs with O and LSE from the fp64 oracle's forward."""
    op, t = _random_inputs(plan, 0)
    ins = op.inputs
    t[ins.seq_len_q].copy_(torch.tensor(lens_q))
    t[ins.seq_len_kv].copy_(torch.tensor(lens_kv))
    o, lse = oracle.attention_forward(t[ins.q], t[ins.k], t[ins.v], causal=op.causal, alignment=op.alignment,
                                      band_left=op.band_left, band_right=op.band_right, sink=t[ins.sink],
                                      seq_len_q=t[ins.seq_len_q], seq_len_kv=t[ins.seq_len_kv])
    t[ins.o].copy_(o)
    t[ins.lse].copy_(lse)
    return op, t


def _backward(engine, op, t):
    """engine.attention_backward (the oracle's in fp64, or frost.reference's in the io dtype) on the plan's op."""
    ins = op.inputs
    return engine.attention_backward(t[ins.q], t[ins.k], t[ins.v], t[ins.o], t[ins.do], t[ins.lse],
                                     causal=op.causal, alignment=op.alignment, band_left=op.band_left,
                                     band_right=op.band_right, sink=t[ins.sink], seq_len_q=t[ins.seq_len_q],
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
    exact, low = _backward(oracle, op, t), _backward(reference, op, t)
    names = ("dq", "dk", "dv", "dsink")
    scale = max(e.abs().max().item() for e in exact[:3])
    failed, report = [], []
    fa_rule_each(names, [outs[getattr(op.outputs, n)] for n in names], exact, low, failed, report,
                 noise_scale=scale)
    assert not failed, (failed, report)


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
