"""GPU tests of the SM120-class backward kernels against the fp64 reference, under the FA rule:

    max|kernel - oracle| <= 2 * max|lowp_reference - oracle| + FLOOR * max|oracle| + NOISE * scale

per gradient, where the oracle is frost.reference in fp64 on the exact kernel inputs (upcast), lowp_reference is
frost.reference in the io dtype (fp32 compute, P and dS rounded like a kernel) and scale is the largest |oracle|
of the three gradients of the problem. FLOOR = 1e-3 covers gradients the low-precision reference gets (near)
exactly; it is below one bf16 ulp (2^-8 relative) and near one fp16 ulp (2^-10), so a real error cannot hide
under it. NOISE = 2^-20 (16 fp32 ulps of the problem's gradient scale) covers gradients that are exactly 0 in
exact arithmetic but come out of any fp32 accumulation as rounding noise: with Skv = 1, P = 1 and O = V, so
dS = dP - delta cancels to ~1e-7 in fp32 (different summation orders in kernel and reference) while the oracle
is 0 and both relative terms vanish. Outputs are poisoned with NaN before each call: an element the kernels do
not write fails.

Run on the GPU machine: python3 -m pytest -m gpu tests/kernels/test_kernels_gpu.py"""

import math

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

FLOOR = 1e-3
NOISE = 2.0 ** -20
DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (32, 40, 64, 72, 96, 128, 160, 192, 256)
MASKS = (("none", False, "top_left"), ("tl", True, "top_left"), ("br", True, "bottom_right"))
# (B, H, Sq, Skv): tails (S = 1, 77, 1000), Sq != Skv both ways, fully masked rows under bottom-right (Sq > Skv)
SHAPES = ((2, 3, 77, 77), (1, 2, 1, 77), (1, 2, 77, 1), (2, 2, 130, 1000), (1, 2, 1000, 515))


def _torch_dtype(name):
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def _rand(shape, dtype, layout, gen):
    """Random (B, H, S, D) tensor; "bshd" gives the transposed view of BSHD memory."""
    b, h, s, d = shape
    if layout == "bshd":
        return torch.randn((b, s, h, d), generator=gen, device="cuda").to(dtype).transpose(1, 2)
    return torch.randn((b, h, s, d), generator=gen, device="cuda").to(dtype)


def _poisoned_like(t):
    out = torch.empty_like(t)
    out.fill_(float("nan"))
    return out


def run_backward(bwd, cfg, q, k, v, o, do, lse, scale):
    from frost.kernels import workspace_regions

    b, h, sq, _ = q.shape
    ws = {}
    for name, n in workspace_regions(cfg, b, h, sq, k.shape[2]):
        ws[name] = torch.empty(max(n, 16), dtype=torch.uint8, device="cuda")
        ws[name].fill_(0xFF)  # NaN pattern in fp32: the kernels must initialise what they read
    dq, dk, dv = _poisoned_like(q), _poisoned_like(k), _poisoned_like(v)
    bwd(q, k, v, o, do, lse, dq, dk, dv, scale=scale, workspace=ws)
    return dq, dk, dv


def check_case(dtype, dqk, dv_dim, causal, alignment, shape, layout="bshd", seed=0):
    from frost import reference
    from frost.kernels import choose_config, compile_backward, detect_arch

    b, h, sq, skv = shape
    tdt = _torch_dtype(dtype)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = _rand((b, h, sq, dqk), tdt, layout, gen)
    k = _rand((b, h, skv, dqk), tdt, layout, gen)
    v = _rand((b, h, skv, dv_dim), tdt, layout, gen)
    do = _rand((b, h, sq, dv_dim), tdt, layout, gen)
    scale = 1.0 / math.sqrt(dqk)
    kw = dict(scale=scale, causal=causal, alignment=alignment)
    o64, lse64 = reference.attention_forward(q.double(), k.double(), v.double(), **kw)
    o = o64.to(tdt)
    lse = lse64.float()
    oracle = reference.attention_backward(q.double(), k.double(), v.double(), o.double(), do.double(),
                                          lse.double(), **kw)[:3]
    lowp = reference.attention_backward(q, k, v, o, do, lse, **kw)[:3]

    cfg = choose_config(dtype, dqk, dv_dim, causal, alignment, detect_arch())
    got = run_backward(compile_backward(cfg), cfg, q, k, v, o, do, lse, scale)
    torch.cuda.synchronize()
    report, failed = [], []
    grad_scale = max(r.abs().max().item() for r in oracle)
    for name, g, ref, lo in zip(("dq", "dk", "dv"), got, oracle, lowp):
        assert torch.isfinite(g).all(), f"{name}: non-finite values (unwritten or NaN) {dtype} {shape}"
        err = (g.double() - ref).abs().max().item()
        ref_err = (lo.double() - ref).abs().max().item()
        bound = 2 * ref_err + FLOOR * ref.abs().max().item() + NOISE * grad_scale
        report.append(f"{name} err={err:.3e} ref_err={ref_err:.3e} bound={bound:.3e}")
        if not err <= bound:
            failed.append(f"{name}: {err:.3e} > {bound:.3e}")
    assert not failed, f"{failed} ({dtype} d={dqk}/{dv_dim} causal={causal} {alignment} {shape} {layout}) {report}"
    return report


@pytest.mark.parametrize("mask", MASKS, ids=[m[0] for m in MASKS])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix(dtype, head_dim, mask):
    _, causal, alignment = mask
    failures = []
    for i, shape in enumerate(SHAPES):
        try:
            check_case(dtype, head_dim, head_dim, causal, alignment, shape, layout=("bshd", "bhsd")[i % 2], seed=i)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("mask", MASKS, ids=[m[0] for m in MASKS])
@pytest.mark.parametrize("head_dim", (64, 128, 256))
def test_long_tail(head_dim, mask):
    _, causal, alignment = mask
    check_case("bfloat16", head_dim, head_dim, causal, alignment, (1, 2, 4097, 4097), seed=7)
    check_case("float16", head_dim, head_dim, causal, alignment, (1, 1, 4097, 1000), seed=8)


@pytest.mark.parametrize("dims", ((128, 64), (192, 128), (72, 40), (256, 32)))
def test_dv_smaller_than_dqk(dims):
    for mask in MASKS:
        check_case("bfloat16", dims[0], dims[1], mask[1], mask[2], (2, 2, 200, 333), seed=3)


@pytest.mark.parametrize("alignment", ("top_left", "bottom_right"))
def test_sanitizer_case(alignment):
    """Small tail shape for compute-sanitizer (memcheck / racecheck) runs: every kernel, both alignments."""
    for d in (64, 96, 128, 192, 256):  # one per main-kernel tile family (8/4 warps, 1/2 passes, M = 64/32/16)
        check_case("bfloat16", d, d, True, alignment, (1, 2, 77, 100), seed=11)
        check_case("float16", d, d, True, alignment, (1, 1, 100, 77), seed=12)


def test_cuda_graph_capture():
    """The call allocates nothing and never syncs: capture it in a CUDA graph and replay."""
    from frost.kernels import choose_config, compile_backward, detect_arch, workspace_regions

    b, h, s, d = 2, 2, 300, 64
    gen = torch.Generator(device="cuda").manual_seed(5)
    q, k, v, o, do = (_rand((b, h, s, d), torch.bfloat16, "bshd", gen) for _ in range(5))
    lse = torch.randn((b, h, s), generator=gen, device="cuda") + 5
    cfg = choose_config("bfloat16", d, d, True, "top_left", detect_arch())
    bwd = compile_backward(cfg)
    ws = {n: torch.empty(x, dtype=torch.uint8, device="cuda") for n, x in workspace_regions(cfg, b, h, s, s)}
    outs = [torch.empty_like(t) for t in (q, k, v)]
    bwd(q, k, v, o, do, lse, *outs, scale=0.125, workspace=ws)  # warm-up outside the capture
    eager = [t.clone() for t in outs]
    for t in outs:
        t.fill_(float("nan"))
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            bwd(q, k, v, o, do, lse, *outs, scale=0.125, workspace=ws, stream=stream)
    torch.cuda.current_stream().wait_stream(stream)
    graph.replay()
    torch.cuda.synchronize()
    for a, e in zip(outs, eager):
        torch.testing.assert_close(a, e, rtol=2e-2, atol=1e-2)  # fp32 atomics: add order may differ
