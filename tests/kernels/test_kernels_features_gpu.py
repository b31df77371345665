"""GPU tests of the seed features of the SM120-class backward kernels -- GQA/MQA, per-batch padding, band
bounds (causal, right-band widening, sliding window, general (L, R)) in both alignments, sink gradients and
deterministic mode, all composed -- against the fp64 oracle under the FA rule (kernel_oracle.py).

Run on the GPU machine: python3 -m pytest -m gpu tests/kernels/test_kernels_features_gpu.py"""

import random

import pytest

torch = pytest.importorskip("torch")

from helpers.fa_rule import run_cases  # noqa: E402
from kernel_oracle import (Case, build_inputs, check_case, compiled, kernel_features, make_workspace,  # noqa: E402
                           poisoned_like)

pytestmark = pytest.mark.gpu

BR, TL = "bottom_right", "top_left"

# The fixed edge list of the issue.
EDGES = {
    "sq1": [Case(sq=1, skv=77, causal=True, alignment=BR), Case(sq=1, skv=77, band_left=3, band_right=0),
            Case(sq=1, skv=1, sink=2.0, hq=4, hkv=2)],
    "skv1": [Case(sq=77, skv=1, causal=True, alignment=TL), Case(sq=77, skv=1, causal=True, alignment=BR, sink=0.5)],
    "empty_batches": [Case(b=3, sq=130, skv=200, seq_len_q=[130, 0, 40], seq_len_kv=[0, 200, 77], hq=4, hkv=2),
                      Case(b=3, sq=130, skv=200, seq_len_q=[0, 0, 0], seq_len_kv=[5, 0, 200], sink=1.0,
                           causal=True, alignment=BR)],
    "fully_masked_rows": [Case(sq=200, skv=70, causal=True, alignment=BR),
                          Case(sq=200, skv=70, causal=True, alignment=BR, sink=-1.0),
                          Case(b=2, sq=150, skv=150, seq_len_kv=[40, 150], band_left=0, band_right=0)],
    "sink_pm30": [Case(b=2, sq=130, skv=130, sink=30.0, causal=True, hq=4, hkv=2, seq_len_q=[130, 70]),
                  Case(b=2, sq=130, skv=130, sink=-30.0, causal=True, hq=4, hkv=2, seq_len_kv=[130, 70]),
                  Case(sq=77, skv=300, sink=[30.0, -30.0], band_left=20, alignment=BR, causal=True)],
    "mqa_64_1": [Case(hq=64, hkv=1, sq=100, skv=130, causal=True, alignment=BR, dqk=64, dv=64),
                 Case(hq=64, hkv=1, b=2, sq=70, skv=70, seq_len_q=[70, 33], sink=0.3, dtype="float16",
                      dqk=128, dv=128)],
    "window_0_and_ge_s": [Case(sq=300, skv=300, causal=True, band_left=0),
                          Case(sq=300, skv=300, causal=True, band_left=0, alignment=BR, seq_len_q=[250]),
                          Case(sq=300, skv=300, causal=True, band_left=300),
                          Case(sq=300, skv=260, band_left=5000, band_right=5000, alignment=BR)],
    "head_dims": [Case(dqk=d, dv=d, b=2, hq=4, hkv=2, sq=150, skv=190, causal=True, band_left=60,
                       seq_len_q=[150, 101], seq_len_kv=[190, 99], sink=0.7, dtype=dt, seed=d)
                  for d in (40, 72, 96, 200) for dt in ("bfloat16", "float16")],
    "br_skv_lt_sq": [Case(b=2, sq=300, skv=120, causal=True, alignment=BR, seq_len_q=[300, 200],
                          seq_len_kv=[120, 50], hq=6, hkv=2),
                     Case(sq=257, skv=64, band_left=16, band_right=8, alignment=BR, sink=1.5)],
    # whole extents empty: the compiled chain skips the kernels with nothing to do (dsink still written)
    "empty_extents": [Case(sq=0, skv=77, hq=4, hkv=2, sink=1.0), Case(sq=77, skv=0, sink=-1.0, causal=True),
                      Case(b=0, sq=30, skv=20, sink=0.5), Case(sq=0, skv=0, sink=2.0, deterministic=True),
                      # no keys with ordered dQ (deterministic; a narrow band): the preprocess alone zeroes dQ
                      Case(sq=77, skv=0, sink=0.5, deterministic=True), Case(sq=60, skv=0, causal=True, band_left=64)],
    # a gradient on the forward's LSE output (strided), with padding, sink, GQA, bands; rows and grid kernels
    "dlse": [Case(b=2, hq=4, hkv=2, sq=150, skv=190, causal=True, band_left=60, seq_len_q=[150, 101],
                  seq_len_kv=[190, 99], sink=0.7, dlse=True, seed=11),
             Case(b=2, hq=4, hkv=1, sq=300, skv=260, dqk=128, dv=128, causal=True, alignment=BR, dlse=True,
                  deterministic=True, seq_len_q=[300, 0], seed=12),
             Case(sq=200, skv=230, dqk=192, dv=192, dlse=True, sink=[2.0, -1.0], dtype="float16", seed=13),
             Case(sq=77, skv=1, dqk=40, dv=40, causal=True, alignment=BR, dlse=True, sink=30.0, seed=14)],
    "right_band_widening": [Case(sq=200, skv=200, causal=True, band_right=37),
                            Case(sq=150, skv=230, causal=True, band_right=70, alignment=BR, hq=4, hkv=1)],
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_edges(name):
    run_cases(check_case, EDGES[name])


def _random_case(rng: random.Random, i: int) -> Case:
    d = rng.choice((32, 40, 64, 72, 96, 128, 160, 192, 200, 256))
    hkv = rng.choice((1, 2))
    g = rng.choice((1, 2, 3, 4, 8))
    b = rng.choice((1, 2, 3))
    sq, skv = rng.randint(1, 400), rng.randint(1, 400)
    mask = rng.choice(("none", "causal", "widen", "window", "general"))
    causal = mask in ("causal", "widen", "window")
    left = rng.randint(0, 150) if mask in ("window", "general") else None
    right = rng.randint(0, 150) if mask in ("widen", "general") else None
    lens_q = [rng.randint(0, sq) for _ in range(b)] if rng.random() < 0.5 else None
    lens_kv = [rng.randint(0, skv) for _ in range(b)] if rng.random() < 0.5 else None
    sink = [rng.uniform(-4, 4) for _ in range(hkv * g)] if rng.random() < 0.5 else None
    return Case(dtype=rng.choice(("float16", "bfloat16")), dqk=d, dv=d if rng.random() < 0.8 else 32, b=b,
                hq=hkv * g, hkv=hkv, sq=sq, skv=skv, causal=causal, alignment=rng.choice((TL, BR)),
                band_left=left, band_right=right, seq_len_q=lens_q, seq_len_kv=lens_kv, sink=sink,
                deterministic=rng.random() < 0.5, layout=rng.choice(("bshd", "bhsd")), seed=i, tag=f"random#{i}")


@pytest.mark.parametrize("chunk", range(4))
def test_random_matrix(chunk):
    """Seeded random combinations of every feature (GQA ratio, padding, band kind, alignment, sink,
    deterministic, head dims, layouts), 12 per chunk."""
    rng = random.Random(2026 + chunk)
    run_cases(check_case, [_random_case(rng, chunk * 100 + i) for i in range(12)])


BITWISE_CASES = {
    # a band: the launch keeps a head's KV tiles together (block_order)
    "band": Case(b=2, hq=8, hkv=2, sq=700, skv=650, dqk=64, dv=64, causal=True, alignment=BR, band_left=300,
                 seq_len_q=[700, 513], seq_len_kv=[650, 480], sink=0.25, deterministic=True, seed=3),
    # causal without a left bound: the longest-first order (heads outermost), many KV tiles per query tile; d128
    # and d96 on wide bands run the dq_gemm set (dS^T stored, dQ by a GEMM of its own)
    "causal": Case(b=2, hq=8, hkv=2, sq=1500, skv=1500, dqk=128, dv=128, causal=True, alignment=TL,
                   seq_len_q=[1500, 999], seq_len_kv=[1500, 1200], sink=-0.5, deterministic=True, seed=4),
    "dq_gemm_d96": Case(b=2, hq=8, hkv=2, sq=1200, skv=1100, dqk=96, dv=96, causal=True, alignment=BR,
                        seq_len_q=[1200, 801], seq_len_kv=[1100, 1000], sink=0.6, deterministic=True, seed=8),
    # the relay on bwd_main_pipe (narrow bands at d96/d128, on their narrow-band sets: the GQA walk with heads
    # outer): dQ one step behind on mbarriers, a step's adds come a trip later, its release after the next trip's
    # GEMMs, from warp step % 8
    "lagged": Case(b=2, hq=8, hkv=2, sq=1200, skv=1100, dqk=96, dv=96, causal=True, alignment=BR, band_left=100,
                   seq_len_q=[1200, 801], seq_len_kv=[1100, 1000], sink=0.6, deterministic=True, seed=8),
    "lagged_d128": Case(b=2, hq=8, hkv=2, sq=1000, skv=1000, dqk=128, dv=128, causal=True, alignment=TL,
                        band_left=250, seq_len_q=[1000, 700], seq_len_kv=[1000, 901], sink=-0.3, deterministic=True,
                        seed=11),
    # d64's narrow-band set (bwd_main's two-barrier step with heads outer and the difference mask), both bounds
    "narrow_d64": Case(b=2, hq=8, hkv=2, sq=700, skv=650, dqk=64, dv=64, causal=False, alignment=BR, band_left=128,
                       band_right=40, seq_len_q=[700, 513], seq_len_kv=[650, 480], sink=0.25, deterministic=True,
                       seed=13),
    # the narrow-band sets at d32 (64-row query tiles; head dim 24 in its pad) and d80 (bwd_main_lag's step, the
    # walk with heads outer; head dim 72), both with the difference mask
    "narrow_d32": Case(b=2, hq=8, hkv=2, sq=600, skv=640, dqk=24, dv=24, causal=True, alignment=TL, band_left=100,
                       seq_len_q=[600, 411], seq_len_kv=[640, 500], sink=-0.2, deterministic=True, seed=14),
    "narrow_d80": Case(b=2, hq=8, hkv=2, sq=900, skv=850, dqk=72, dv=72, causal=False, alignment=BR, band_left=300,
                       band_right=60, seq_len_q=[900, 555], seq_len_kv=[850, 700], sink=0.4, deterministic=True,
                       seed=15),
    # the warp-grid kernel: one pass double-buffered (d192), two passes single-buffered (d256)
    "grid": Case(b=2, hq=8, hkv=2, sq=600, skv=600, dqk=192, dv=192, causal=True, alignment=TL,
                 seq_len_q=[600, 411], seq_len_kv=[600, 530], sink=0.1, deterministic=True, seed=5),
    "grid_2pass": Case(b=2, hq=4, hkv=2, sq=300, skv=350, dqk=256, dv=256, causal=True, alignment=BR,
                       band_left=200, seq_len_q=[300, 170], seq_len_kv=[350, 300], sink=-1.0, deterministic=True,
                       seed=6),
    # the ordered set's own tile (catalogue._ORDERED_CHANGES: d160 adds its whole dQ after one GEMM), which d160 runs on
    # narrow bands (wide ones take the dq_gemm set)
    "ordered_tile": Case(b=2, hq=4, hkv=2, sq=400, skv=380, dqk=160, dv=160, causal=True, alignment=TL,
                         band_left=120, seq_len_q=[400, 233], seq_len_kv=[380, 301], sink=0.3, deterministic=True,
                         seed=10),
    # the rows kernel's dq_gemm set (d160's pad, with a head dim narrower than it)
    "rows_dq_gemm": Case(b=2, hq=6, hkv=2, sq=333, skv=290, dqk=136, dv=136, causal=True, alignment=BR,
                         seq_len_q=[333, 150], seq_len_kv=[290, 201], sink=-0.4, deterministic=True, seed=12),
    # the grid kernel with V tiles narrower than Q/K (192/128)
    "grid_narrow_v": Case(b=2, hq=8, hkv=2, sq=500, skv=450, dqk=192, dv=128, causal=True, alignment=BR,
                          seq_len_q=[500, 377], seq_len_kv=[450, 301], sink=0.7, deterministic=True, seed=9),
}


@pytest.mark.parametrize("which", sorted(BITWISE_CASES))
def test_deterministic_bitwise(which):
    """deterministic=True: 20 runs give bitwise-identical dQ/dK/dV/dSink (GQA + padding + sink, both block
    orders)."""
    c = BITWISE_CASES[which]
    inp = build_inputs(c)
    cfg, bwd = compiled(c)
    gemm_cases = ("causal", "dq_gemm_d96", "grid", "grid_2pass", "grid_narrow_v", "rows_dq_gemm")
    assert cfg.key.dq_gemm == (which in gemm_cases), which
    assert cfg.key.narrow == (which in ("lagged", "lagged_d128") or which.startswith("narrow_")), which
    feats = kernel_features(c, inp)
    ws = make_workspace(cfg, c.b, c.hq, c.sq, c.skv, c.hkv)
    first = None
    for _ in range(20):
        outs = [poisoned_like(inp[n]) for n in ("q", "k", "v")] + [torch.full_like(inp["sink"], float("nan"))]
        bwd(*(inp[n] for n in ("q", "k", "v", "o", "do", "lse")), *outs[:3], scale=inp["kw"]["scale"],
            workspace=ws, dsink=outs[3], **feats)
        if first is None:
            first = [t.clone() for t in outs]
        else:
            for name, a, e in zip(("dq", "dk", "dv", "dsink"), outs, first):
                assert torch.equal(_bits(a), _bits(e)), f"{name} differs between runs"
    run_cases(check_case, [c])


DET_CASES = [Case(b=2, hq=4, hkv=2, sq=s, skv=skv, dqk=d, dv=d, causal=causal, alignment=al, band_left=left,
                 band_right=right, seq_len_q=lq, seq_len_kv=lkv, sink=sink, deterministic=True, seed=i)
             for i, (d, s, skv, causal, al, left, right, lq, lkv, sink) in enumerate([
                 (64, 700, 700, True, TL, None, None, None, None, None),
                 (64, 500, 900, True, BR, None, None, [500, 321], [900, 444], 0.3),
                 (128, 640, 600, False, TL, None, None, None, [600, 1], None),
                 (128, 900, 900, True, TL, 128, None, [900, 600], None, 1.0),
                 (64, 600, 700, False, BR, 100, 50, None, None, -2.0),
                 (96, 333, 777, True, TL, None, 70, [333, 0], [777, 500], None),
                 (192, 450, 520, True, BR, None, None, [450, 200], [520, 333], 0.7),
                 # the first visitor stores, the last writes dQ (TileConfig.dq_direct); rows no KV tile writes
                 # (past the lengths, seeing no key) are zeroed by the preprocess
                 (64, 300, 120, True, BR, None, None, [300, 200], [120, 50], None),
                 (64, 520, 520, True, TL, 127, None, None, [520, 0], 0.4),
                 (32, 130, 100, False, TL, None, None, [130, 77], None, None),
                 (48, 400, 380, True, BR, 60, 20, [400, 257], [380, 300], -1.0),
                 (80, 350, 300, True, TL, None, None, [350, 90], [300, 299], 0.2),
                 (160, 260, 260, True, BR, 100, None, None, [260, 129], None),
                 (224, 200, 330, False, BR, None, None, [200, 150], [330, 64], 1.5),
                 (256, 300, 300, True, TL, None, 40, [300, 1], None, -0.5),
                 # dq_gemm (wide bands at d96/d128): bottom-right with fewer keys than rows and a widened band,
                 # query tiles no KV tile visits, a band that starts past the first keys
                 (128, 700, 500, True, BR, None, 30, [700, 333], [500, 499], 0.5),
                 (96, 260, 300, False, TL, 300, 100, [260, 1], [300, 0], None),
                 (128, 333, 1000, True, BR, 700, None, None, [1000, 640], -1.0),
                 # d160's dq_gemm set (the rows kernel, one pass), a band wider than its ordered ones
                 (160, 300, 350, True, BR, 200, None, [300, 111], [350, 200], 0.9)])]


@pytest.mark.parametrize("i", range(len(DET_CASES)))
def test_deterministic_modes(i):
    """Deterministic mode across mask kinds (ordered dQ accumulation), vs the oracle."""
    run_cases(check_case, [DET_CASES[i]])


def _bits(t):
    return t.contiguous().view(torch.uint8)


@pytest.mark.parametrize("det", (False, True), ids=("default", "deterministic"))
def test_sanitizer_features(det):
    """Small GQA + padding + band + sink (+ dlse) configuration for compute-sanitizer (memcheck / racecheck): one
    head dim per main-kernel tile family (rows kernel with 8/4 warps, the warp-grid kernel in one/two passes, with
    V as wide as Q/K and narrower; d96 and d128: dQ one step behind on mbarriers, in deterministic mode released
    through an "adds done" mbarrier by the warps in turn, and on a wide band the dq_gemm set; the 48-key band runs
    the narrow-band sets up to d128, d32's with 64-row query tiles and d80's on bwd_main_lag's step)."""
    run_cases(check_case,
              [Case(b=2, hq=4, hkv=2, sq=100, skv=140, dqk=d, dv=d, causal=True, alignment=BR, band_left=40,
                    band_right=8, seq_len_q=[100, 61], seq_len_kv=[140, 77], sink=0.5, deterministic=det,
                    dlse=d == 128, seed=d) for d in (32, 64, 80, 96, 128, 192, 256)]
              # on a wide band the dq_gemm sets (dS^T stored, dQ by its own GEMM): d96/d128 in deterministic
              # mode, d160 and head dim 224 (pad 256: the grid kernel's set) in both
              + [Case(b=2, hq=4, hkv=2, sq=150, skv=140, dqk=d, dv=d, causal=True, alignment=BR, band_left=None,
                      band_right=8, seq_len_q=[150, 61], seq_len_kv=[140, 77], sink=0.5, deterministic=det,
                      dlse=d == 96, seed=d + 1) for d in (96, 128, 160, 224)]
              + [Case(b=2, hq=4, hkv=2, sq=100, skv=140, dqk=192, dv=128, causal=True, alignment=BR, band_left=40,
                      band_right=8, seq_len_q=[100, 61], seq_len_kv=[140, 77], sink=0.5, deterministic=det,
                      seed=7)])


def test_bad_runtime_inputs():
    """Wrong seq_len / sink / dlse tensors raise TensorError (a ValueError) naming the tensor, before any launch."""
    from frost.errors import TensorError

    c = Case(b=2, hq=4, hkv=2, sq=50, skv=60, sink=0.0)
    inp = build_inputs(c)
    cfg, bwd = compiled(c)
    ws = make_workspace(cfg, c.b, c.hq, c.sq, c.skv, c.hkv)
    args = [inp[n] for n in ("q", "k", "v", "o", "do", "lse")] + [poisoned_like(inp[n]) for n in ("q", "k", "v")]
    good_sink, dsink = inp["sink"], torch.empty_like(inp["sink"])
    bad = {
        "seq_len_q.dtype": dict(seq_len_q=torch.tensor([1, 2], dtype=torch.int64, device="cuda")),
        "seq_len_q.shape": dict(seq_len_q=torch.tensor([1, 2, 3], dtype=torch.int32, device="cuda")),
        "seq_len_kv.device": dict(seq_len_kv=torch.tensor([1, 2], dtype=torch.int32)),
        "seq_len_kv": dict(seq_len_kv=torch.tensor([1, 61], dtype=torch.int32, device="cuda"), check_lengths=True),
        "sink.shape": dict(sink=torch.zeros(3, device="cuda"), dsink=dsink),
        "sink.dtype": dict(sink=good_sink.double(), dsink=dsink),
        "sink.device": dict(sink=good_sink.cpu(), dsink=dsink),
        "dsink": dict(sink=good_sink),
        "dlse.shape": dict(dlse=torch.zeros(2, 4, 49, device="cuda")),
        "dlse.dtype": dict(dlse=torch.zeros(2, 4, 50, device="cuda", dtype=torch.float64)),
    }
    for subject, kw in bad.items():
        for t in args[6:]:
            t.fill_(float("nan"))
        with pytest.raises(TensorError) as e:
            bwd(*args, scale=0.125, workspace=ws, **kw)
        assert subject in str(e.value), (subject, str(e.value))
        torch.cuda.synchronize()
        assert all(bool(t.isnan().all()) for t in args[6:]), f"{subject}: a kernel ran before the error"
