"""GPU tests of the packed (varlen) kernel sets, forward and backward, against the fp64 oracle run per sequence
(helpers/oracle_packed.py), under the FA rule of packed_checks.py:

    max|kernel - oracle| <= 2 * max|lowp_reference - oracle| + FLOOR * max|oracle| + NOISE * scale

Tensors are packed THD (tokens of every sequence along axis 0), with random length mixes (0, 1, 77, 4097, one long
sequence among short ones), GQA, sinks, bands, both alignments, seqused (padded THD), both LSE layouts,
non-contiguous token strides, token offsets past 2^32 elements and tensors longer than cu_seqlens[-1]. Outputs are
poisoned with NaN: rows inside a segment must be written (O, LSE, dQ, dK, dV; padding rows as exact zeros, LSE
-inf), rows outside every segment must stay untouched (the kernels' contract: the APIs hand out zeroed gradients).
Deterministic mode must give bitwise equal gradients on two runs.

Run on the GPU machine: python3 -m pytest -m gpu tests/kernels/test_varlen_gpu.py"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from helpers.fa_rule import run_cases  # noqa: E402
from helpers.tensors import cu_seqlens, randn_thd  # noqa: E402
from packed_checks import VarCase, check_backward, check_forward, logical  # noqa: E402  (tests/kernels: sys.path)

pytestmark = pytest.mark.gpu


MIX = (77, 0, 1, 300, 4097, 5)             # empty and one-token sequences, one long among short ones
SHORT = (129, 0, 64, 1, 250)


def _cases(dtype: str, d: int) -> list[VarCase]:
    return [
        VarCase(MIX, dtype=dtype, dqk=d, dv=d, causal=True, seed=1),
        VarCase(SHORT, dtype=dtype, dqk=d, dv=d, hq=8, hkv=1, sink=2.0, seed=2),
        VarCase(SHORT, (300, 7, 0, 65, 128), dtype=dtype, dqk=d, dv=d, causal=True, alignment="bottom_right",
                sink=-30.0, lse_token_major=True, seed=3),
        VarCase(SHORT, dtype=dtype, dqk=d, dv=d, causal=True, band_left=32, spread=True, extra=40, seed=4),
        VarCase(SHORT, (200, 5, 64, 1, 300), dtype=dtype, dqk=d, dv=d, band_left=20, band_right=10,
                alignment="bottom_right", used_q=(100, 0, 64, 1, 17), used_kv=(150, 5, 0, 1, 300), seed=5),
        VarCase(SHORT, dtype=dtype, dqk=d, dv=d, causal=True, sink=1.0, deterministic=True, seed=6),
    ]


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("d", (64, 128, 256))
def test_forward(dtype, d):
    run_cases(check_forward, _cases(dtype, d))


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("d", (64, 128, 256))
def test_backward(dtype, d):
    run_cases(check_backward, _cases(dtype, d))


def _padded_twin(lens, cu, *packed_tensors):
    """Packed (T, H, D) tensors as logical (B, H, S, D) batches, zero past each document's length."""
    b, s = len(lens), max(lens)
    out = []
    for t in packed_tensors:
        x = t.new_zeros((b, s, *t.shape[1:]))
        for i in range(b):
            x[i, :lens[i]] = t[cu[i]:cu[i + 1]]
        out.append(x.transpose(1, 2))
    return out


TWINS = ((64, 4, 2, (77, 0, 1, 300, 1029, 5), True, True, False), (64, 8, 8, (129, 64, 0, 250), False, False, False),
         (64, 4, 1, (300, 17, 128, 1000), True, False, True), (128, 4, 2, (77, 0, 1, 300, 1029, 5), True, True, False),
         (128, 8, 8, (129, 64, 0, 250), False, False, False), (128, 4, 1, (300, 17, 128, 1000), True, False, True),
         (256, 4, 2, (77, 0, 1, 300, 1029, 5), True, True, False))


@pytest.mark.parametrize("twin", TWINS, ids=[f"d{t[0]}-h{t[1]}/{t[2]}-det{int(t[6])}" for t in TWINS])
def test_packed_equals_padded_batch(twin):
    """The same documents packed and as a dense padded batch (seq_len): the packed sets run the dense sets' code on
    each document, so O, LSE, dK, dV and dsink are bitwise equal; dQ (fp32 adds in another order, or another dQ
    algorithm in deterministic mode) agrees within 2^-7 of its largest value."""
    from frost.kernels import choose_config, compile_backward, detect_arch, workspace_regions
    from frost.kernels.forward import choose_forward_config, compile_forward
    from frost.kernels.packed import Packed

    d, hq, hkv, lens, causal, with_sink, det = twin
    arch, scale = detect_arch(), 1 / math.sqrt(d)
    gen = torch.Generator(device="cuda").manual_seed(0)
    t, b, s = sum(lens), len(lens), max(lens)
    cu_t = cu_seqlens(lens, "cuda")
    cu = cu_t.tolist()
    q, k, v, do = (randn_thd(t, h, d, torch.bfloat16, gen=gen, device="cuda") for h in (hq, hkv, hkv, hq))
    sink = torch.randn(hq, generator=gen, device="cuda") if with_sink else None
    lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
    packed = Packed(cu_t, cu_t, s, s)
    o, lse = torch.full_like(q, float("nan")), torch.full((hq, t), float("nan"), device="cuda")
    compile_forward(choose_forward_config("bfloat16", d, d, arch, varlen=True))(
        logical(q), logical(k), logical(v), logical(o), lse, scale=scale, causal=causal, sink=sink, packed=packed)
    qd, kd, vd, dod = _padded_twin(lens, cu, q, k, v, do)
    od, lsed = torch.empty_like(qd), torch.empty((b, hq, s), device="cuda")
    compile_forward(choose_forward_config("bfloat16", d, d, arch))(qd, kd, vd, od, lsed, scale=scale, causal=causal,
                                                                   sink=sink, seq_len_q=lens_t, seq_len_kv=lens_t)
    cfg = choose_config("bfloat16", d, d, causal, "top_left", arch, deterministic=det, varlen=True,
                        gqa_group=hq // hkv)
    ws = {n: torch.empty(max(x, 16), dtype=torch.uint8, device="cuda")
          for n, x in workspace_regions(cfg, b, hq, s, s, tokens_q=t)}
    grads = [torch.full_like(x, float("nan")) for x in (q, k, v)]
    dsink = None if sink is None else torch.empty_like(sink)
    compile_backward(cfg)(*(logical(x) for x in (q, k, v, o, do)), lse, *(logical(g) for g in grads), scale=scale,
                          workspace=ws, sink=sink, dsink=dsink, deterministic=det, packed=packed)
    cfg_d = choose_config("bfloat16", d, d, causal, "top_left", arch, deterministic=det, gqa_group=hq // hkv)
    ws_d = {n: torch.empty(max(x, 16), dtype=torch.uint8, device="cuda")
            for n, x in workspace_regions(cfg_d, b, hq, s, s)}
    (o_pad,) = _padded_twin(lens, cu, o)
    lse_pad = torch.full((b, hq, s), float("-inf"), device="cuda")
    for i in range(b):
        lse_pad[i, :, :lens[i]] = lse[:, cu[i]:cu[i + 1]]
    grads_d = [torch.empty_like(x) for x in (qd, kd, vd)]
    dsink_d = None if sink is None else torch.empty_like(sink)
    compile_backward(cfg_d)(qd, kd, vd, o_pad, dod, lse_pad, *grads_d, scale=scale, workspace=ws_d, sink=sink,
                            dsink=dsink_d, seq_len_q=lens_t, seq_len_kv=lens_t, deterministic=det)
    torch.cuda.synchronize()
    for i in (i for i in range(b) if lens[i]):
        rows = slice(cu[i], cu[i + 1])
        assert torch.equal(o[rows], od[i, :, :lens[i]].transpose(0, 1)), ("o", i)
        assert torch.equal(lse[:, rows], lsed[i, :, :lens[i]]), ("lse", i)
        for name, g, g_d in zip(("dk", "dv"), grads[1:], grads_d[1:]):
            assert torch.equal(g[rows], g_d[i, :, :lens[i]].transpose(0, 1)), (name, i)
        a, want = grads[0][rows].float(), grads_d[0][i, :, :lens[i]].transpose(0, 1).float()
        assert (a - want).abs().max().item() <= 2 ** -7 * max(want.abs().max().item(), 1e-3), ("dq", i)
    if sink is not None:
        assert torch.equal(dsink, dsink_d)


@pytest.mark.parametrize("d", (64, 128))
def test_sanitizer_case(d):
    """Small packed problems for compute-sanitizer (memcheck / racecheck): a tail, an empty and a one-token
    sequence, GQA, a sink, seqused, tokens past cu_seqlens[-1], both dQ orders."""
    cases = [VarCase((77, 0, 1, 130), dqk=d, dv=d, causal=True, sink=1.0, extra=9, seed=8),
             VarCase((77, 0, 1, 130), dqk=d, dv=d, band_left=16, band_right=3, used_q=(70, 0, 1, 100),
                     used_kv=(77, 0, 0, 129), deterministic=True, seed=9)]
    run_cases(check_forward, cases)
    run_cases(check_backward, cases)


# A token stride of 2^23 + 64 elements (under the 2^24 that Q's and dO's may have): token 600 of a tensor lies past
# 2^32 elements from its base, so every 32-bit product of a token and a stride would wrap.
WIDE_STRIDE = 2 ** 23 + 64


@pytest.mark.parametrize("d", (64, 128))
def test_token_offsets_past_2_32_elements(d):
    """int64 addressing: every tensor a view of one ~10 GB buffer with a token stride of WIDE_STRIDE elements, so the
    later segments' tokens (their Q, K, V, dO reads and their O, dQ, dK, dV writes) lie past 2^31 and 2^32
    elements; both dQ orders."""
    lens = (250, 1, 0, 349)
    cases = [VarCase(lens, dqk=d, dv=d, hq=2, hkv=1, causal=True, sink=1.0, token_stride=WIDE_STRIDE, seed=10),
             VarCase(lens, dqk=d, dv=d, hq=2, hkv=1, band_left=64, deterministic=True, token_stride=WIDE_STRIDE,
                     seed=11)]
    assert (sum(lens) - 1) * WIDE_STRIDE > 2 ** 32
    run_cases(check_forward, cases)
    run_cases(check_backward, cases)
