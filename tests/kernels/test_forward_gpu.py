"""GPU tests of the SM120-class forward kernel (frost.kernels.forward) against the fp64 oracle, under the FA
rule for O and LSE (forward_checks.py, helpers/fa_rule.py):

    max|kernel - oracle| <= 2 * max|lowp_reference - oracle| + FLOOR * max|oracle| + NOISE * max|oracle|

with the oracle helpers/oracle.py in fp64 on the exact kernel inputs and lowp_reference frost.reference in the io
dtype (fp32 compute, P rounded like a kernel). LSE entries the oracle gives as -inf (padded rows, rows that see no
key without a sink) must be exactly -inf; padded rows of O exact zeros. Outputs are poisoned with NaN before each
call, so an element the kernel does not write fails. The matrix samples (dtype, head dims, mask, lengths, GQA,
padding, sink) combinations so that it runs in a few minutes.

Run on the GPU machine: python3 -m pytest -m gpu tests/kernels/test_forward_gpu.py"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from forward_checks import FwdCase, check_case, compiled, inputs, outputs  # noqa: E402  (tests/kernels is on sys.path)
from helpers.fa_rule import run_cases  # noqa: E402

pytestmark = pytest.mark.gpu


MASKS = (dict(causal=False), dict(causal=True), dict(causal=True, alignment="bottom_right"))
# (dqk, dv, dtypes): every pad, odd dims (40, 72, 200), MLA 192/128; both dtypes at the speed-critical 64 / 128
HEAD_DIMS = ((32, 32, ("float16",)), (40, 40, ("bfloat16",)), (64, 64, ("float16", "bfloat16")),
             (72, 72, ("float16",)), (96, 96, ("bfloat16",)), (128, 128, ("float16", "bfloat16")),
             (160, 160, ("float16",)), (192, 192, ("bfloat16",)), (200, 200, ("float16",)),
             (256, 256, ("bfloat16",)), (192, 128, ("bfloat16",)))
# (B, Hq, Hkv, Sq, Skv): tails, S = 1 both ways, Sq != Skv both ways (rows that see no key under bottom-right)
SHAPES = ((2, 3, 3, 77, 77), (1, 2, 2, 1, 77), (1, 2, 2, 77, 1), (1, 2, 1, 130, 1000), (1, 4, 2, 1000, 515))


@pytest.mark.parametrize("dims", HEAD_DIMS, ids=[f"d{a}v{b}" for a, b, _ in HEAD_DIMS])
def test_head_dims(dims):
    dqk, dv, dtypes = dims
    cases = []
    for i, shape in enumerate(SHAPES):
        b, hq, hkv, sq, skv = shape
        for j, mask in enumerate(MASKS):
            cases.append(FwdCase(dtypes[(i + j) % len(dtypes)], dqk, dv, b, hq, hkv, sq, skv, seed=i * 3 + j,
                                 layout=("bshd", "bhsd")[(i + j) % 2], **mask))
    run_cases(check_case, cases)


# Bands around either diagonal: (0, 0) the diagonal alone, a 128-token window, right widening, a band that leaves
# early rows without keys, a window with bottom-right alignment and Sq < Skv.
BANDS = (dict(band_left=0, band_right=0), dict(causal=True, band_left=128), dict(causal=True, band_right=16),
         dict(band_left=3, band_right=40), dict(causal=True, alignment="bottom_right", band_left=100),
         dict(band_right=5, alignment="bottom_right"))


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("d", (64, 128))
def test_bands(dtype, d):
    cases = [FwdCase(dtype, d, d, 1, 2, 1, sq, skv, seed=i, **band)
             for i, band in enumerate(BANDS) for sq, skv in ((1000, 1000), (300, 1100), (700, 129))]
    run_cases(check_case, cases)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_gqa_padding_sink(dtype):
    """GQA 8:1 and MQA, per-batch lengths incl. zero-length sequences, sinks of +-30 (and mixed per head)."""
    lens_q, lens_kv = [77, 0, 300, 1], [300, 200, 0, 5]
    cases = [
        FwdCase(dtype, 64, 64, 4, 16, 2, 300, 300, seq_len_q=lens_q, seq_len_kv=lens_kv, sink=30.0),
        FwdCase(dtype, 128, 128, 4, 8, 1, 300, 300, True, seq_len_q=lens_q, seq_len_kv=lens_kv, sink=-30.0),
        FwdCase(dtype, 64, 64, 2, 8, 1, 513, 1025, True, "bottom_right", sink=[30.0, -30.0, 0.5, -2.0] * 2,
                seq_len_kv=[1025, 700]),
        FwdCase(dtype, 96, 96, 2, 16, 2, 257, 257, True, band_left=64, seq_len_q=[257, 100], sink=1.5),
        FwdCase(dtype, 192, 128, 2, 4, 1, 200, 333, True, "bottom_right", seq_len_q=[0, 200],
                seq_len_kv=[333, 0], sink=-30.0),
        FwdCase(dtype, 256, 256, 1, 4, 4, 129, 65, sink=30.0, band_left=10, band_right=10),
    ]
    run_cases(check_case, cases)


@pytest.mark.parametrize("d", (64, 128, 256))
def test_long(d):
    """S = 4097 (one row past a tile boundary), causal both alignments and a sliding window with a sink."""
    run_cases(check_case, [FwdCase("bfloat16", d, d, 1, 2, 1, 4097, 4097, True, seed=1),
                           FwdCase("float16", d, d, 1, 2, 2, 4097, 1000, True, "bottom_right", seed=2),
                           FwdCase("bfloat16", d, d, 1, 2, 1, 4097, 4097, True, band_left=128, sink=0.5, seed=3)])


def _variant_tiles():
    from bench_forward import VARIANTS  # benchmarks/ is on sys.path (conftest.py)

    return [(d, tile) for d, tiles in VARIANTS.items() for tile in tiles]


@pytest.mark.parametrize("d,tile", _variant_tiles(), ids=lambda x: "-".join(map(str, x)) if isinstance(x, tuple)
                         else f"d{x}")
def test_variant_tiles(d, tile):
    """Every tile bench_forward times (the table's and its alternatives) against the oracle: tails, both
    alignments, a window with a sink, GQA with per-batch lengths, S past a tile boundary."""
    run_cases(check_case, [
        FwdCase("bfloat16", d, d, 2, 3, 3, 77, 77, tile=tile),
        FwdCase("bfloat16", d, d, 1, 4, 2, 1000, 515, True, "bottom_right", seed=1, layout="bhsd", tile=tile),
        FwdCase("bfloat16", d, d, 1, 2, 1, 1000, 1000, True, band_left=128, sink=0.5, seed=2, tile=tile),
        FwdCase("bfloat16", d, d, 4, 8, 2, 300, 300, True, seq_len_q=[77, 0, 300, 1], seq_len_kv=[300, 200, 0, 5],
                sink=-30.0, seed=3, tile=tile),
        FwdCase("bfloat16", d, d, 1, 2, 1, 4097, 4097, seed=4, tile=tile)])


def test_empty_keys_and_rows():
    """No keys at all (Skv = 0): O = 0 and LSE = sink (or -inf); no query rows (Sq = 0): nothing is launched."""
    run_cases(check_case, [FwdCase("bfloat16", 64, 64, 2, 2, 2, 33, 0),
                           FwdCase("float16", 128, 128, 2, 4, 2, 33, 0, sink=2.0),
                           FwdCase("bfloat16", 64, 64, 2, 2, 2, 0, 50)])


def test_rows_past_sq_untouched():
    """O written through a view of a larger buffer: the rows past Sq stay as they were (NaN)."""
    c = FwdCase("bfloat16", 64, 64, 2, 2, 1, 77, 90, True)
    q, k, v, kw = inputs(c)
    buf = torch.full((2, 200, 2, 64), float("nan"), dtype=q.dtype, device="cuda")
    o = buf[:, :77].transpose(1, 2)
    lse_buf = torch.full((2, 2, 200), float("nan"), device="cuda")
    compiled(c)(q, k, v, o, lse_buf[:, :, :77], **kw)
    torch.cuda.synchronize()
    assert bool(torch.isnan(buf[:, 77:]).all()) and bool(torch.isnan(lse_buf[:, :, 77:]).all())
    assert bool(torch.isfinite(o).all()) and bool(torch.isfinite(lse_buf[:, :, :77]).all())


def test_cuda_graph_replay():
    """A call captured in a CUDA graph (no allocation, no sync) replays to the same outputs for new inputs."""
    c = FwdCase("bfloat16", 128, 128, 2, 4, 2, 300, 300, True, sink=1.0, seq_len_q=[300, 150])
    q, k, v, kw = inputs(c)
    fwd = compiled(c)
    o, lse = outputs(q, c.dv, c.layout)
    fwd(q, k, v, o, lse, **kw)  # compiled and warm before capture
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        fwd(q, k, v, o, lse, **kw)
    torch.cuda.current_stream().wait_stream(stream)
    q.copy_(torch.randn_like(q))
    graph.replay()
    o2, lse2 = outputs(q, c.dv, c.layout)
    fwd(q, k, v, o2, lse2, **kw)
    torch.cuda.synchronize()
    assert torch.equal(o, o2) and torch.equal(lse.nan_to_num(), lse2.nan_to_num())


def test_bad_arguments():
    from frost.errors import FrostError

    c = FwdCase("bfloat16", 64, 64, 1, 4, 2, 10, 10)
    q, k, v, kw = inputs(c)
    o, lse = outputs(q, 64, "bshd")
    fwd = compiled(c)
    with pytest.raises(FrostError, match="k.shape"):
        fwd(q, k[:, :, :, :32], v, o, lse, **kw)
    with pytest.raises(FrostError, match="lse"):
        fwd(q, k, v, o, lse[:, :2], **kw)
    with pytest.raises(FrostError, match="sink"):
        fwd(q, k, v, o, lse, **{**kw, "sink": torch.zeros(3, device="cuda")})
    with pytest.raises(FrostError, match="scale"):
        fwd(q, k, v, o, lse, **{**kw, "scale": -1.0})
    with pytest.raises(FrostError, match="alignment"):
        fwd(q, k, v, o, lse, **{**kw, "alignment": "diagonal"})
    with pytest.raises(FrostError, match="seq_len_q"):
        fwd(q, k, v, o, lse, **{**kw, "seq_len_q": torch.tensor([11], dtype=torch.int32, device="cuda")},
            check_lengths=True)


@pytest.mark.parametrize("d", (64, 128))
def test_sanitizer_case(d):
    """Small GQA + padding + band + sink + tail configuration for compute-sanitizer (memcheck / racecheck)."""
    run_cases(check_case, [FwdCase("bfloat16", d, d, 2, 4, 2, 150, 133, True, "bottom_right", band_left=40,
                                   seq_len_q=[150, 70], seq_len_kv=[100, 133], sink=0.5)])
