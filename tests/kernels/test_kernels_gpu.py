"""GPU tests of the SM120-class backward kernels against the fp64 oracle, under the FA rule (see
kernel_oracle.py, shared with test_kernels_features_gpu.py).

Run on the GPU machine: python3 -m pytest -m gpu tests/kernels/test_kernels_gpu.py"""

import pytest

torch = pytest.importorskip("torch")

from helpers.fa_rule import run_cases  # noqa: E402
from helpers.tensors import randn_bhsd  # noqa: E402
from kernel_oracle import Case, check_case  # noqa: E402  (tests/kernels is on sys.path under pytest)

pytestmark = pytest.mark.gpu

DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (32, 40, 48, 64, 72, 80, 96, 128, 160, 192, 256)
MASKS = (("none", False, "top_left"), ("tl", True, "top_left"), ("br", True, "bottom_right"))
# (B, H, Sq, Skv): tails (S = 1, 77, 1000), Sq != Skv both ways, fully masked rows under bottom-right (Sq > Skv)
SHAPES = ((2, 3, 77, 77), (1, 2, 1, 77), (1, 2, 77, 1), (2, 2, 130, 1000), (1, 2, 1000, 515))


def check_mha(dtype, dqk, dv_dim, causal, alignment, shape, layout="bshd", seed=0):
    """check_case on an MHA problem without padding, band or sink."""
    b, h, sq, skv = shape
    return check_case(Case(dtype, dqk, dv_dim, b, h, h, sq, skv, causal, alignment, layout=layout, seed=seed))


@pytest.mark.parametrize("mask", MASKS, ids=[m[0] for m in MASKS])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix(dtype, head_dim, mask):
    _, causal, alignment = mask
    run_cases(check_case, [Case(dtype, head_dim, head_dim, b, h, h, sq, skv, causal, alignment,
                                layout=("bshd", "bhsd")[i % 2], seed=i) for i, (b, h, sq, skv) in enumerate(SHAPES)])


@pytest.mark.parametrize("mask", MASKS, ids=[m[0] for m in MASKS])
@pytest.mark.parametrize("head_dim", (64, 128, 256))
def test_long_tail(head_dim, mask):
    _, causal, alignment = mask
    check_mha("bfloat16", head_dim, head_dim, causal, alignment, (1, 2, 4097, 4097), seed=7)
    check_mha("float16", head_dim, head_dim, causal, alignment, (1, 1, 4097, 1000), seed=8)


@pytest.mark.parametrize("dims", ((128, 64), (192, 128), (72, 40), (256, 32)))
def test_dv_smaller_than_dqk(dims):
    for mask in MASKS:
        check_mha("bfloat16", dims[0], dims[1], mask[1], mask[2], (2, 2, 200, 333), seed=3)


@pytest.mark.parametrize("alignment", ("top_left", "bottom_right"))
def test_sanitizer_case(alignment):
    """Small tail shape for compute-sanitizer (memcheck / racecheck) runs: every kernel, both alignments."""
    for d in (48, 64, 80, 96, 128, 160, 192, 256):  # rows kernel: 4/8 warps, 128/64 keys, M 32/64, 8-column dQ
        # warp slices (d48, d80, d96), Q/dO loaded by fewer threads (d48, d80), dQ one step behind with dO and dS^T
        # in V's buffer (d80: bwd_main_lag; d96, d128: its mbarrier pipeline bwd_main_pipe); grid kernel: 1/2
        # passes
        check_mha("bfloat16", d, d, True, alignment, (1, 2, 77, 100), seed=11)
        check_mha("float16", d, d, True, alignment, (1, 1, 100, 77), seed=12)
    check_mha("bfloat16", 192, 128, True, alignment, (1, 2, 77, 100), seed=13)  # grid kernel, narrower V tiles
    # d128's mbarriers (bwd_main_pipe) over ten steps: each Q/dO stage and dS^T buffer refilled several times
    check_mha("bfloat16", 128, 128, False, alignment, (1, 1, 300, 130), seed=14)


def test_cuda_graph_capture():
    """The call allocates nothing and never syncs: capture it in a CUDA graph and replay."""
    from frost.kernels import choose_config, compile_backward, detect_arch, workspace_regions

    b, h, s, d = 2, 2, 300, 64
    gen = torch.Generator(device="cuda").manual_seed(5)
    q, k, v, o, do = (randn_bhsd((b, h, s, d), torch.bfloat16, layout="bshd", gen=gen, device="cuda")
                      for _ in range(5))
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
