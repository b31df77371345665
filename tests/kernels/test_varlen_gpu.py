"""GPU tests of the packed (varlen) kernel sets, forward and backward, against the fp64 reference run per sequence
(frost.reference.varlen), under the FA rule of kernel_oracle.py:

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
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

from kernel_oracle import FLOOR, NOISE, torch_dtype  # noqa: E402  (tests/kernels is on sys.path)

pytestmark = pytest.mark.gpu


@dataclass
class VarCase:
    lens_q: tuple
    lens_kv: tuple | None = None          # None: the same as lens_q
    dtype: str = "bfloat16"
    dqk: int = 64
    dv: int = 64
    hq: int = 4
    hkv: int = 2
    causal: bool = False
    alignment: str = "top_left"
    band_left: int | None = None
    band_right: int | None = None
    sink: float | None = None
    used_q: tuple | None = None           # seqused_q: valid tokens at the start of each segment
    used_kv: tuple | None = None
    lse_token_major: bool = False         # LSE stored (Tq, Hq)
    spread: bool = False                  # token stride twice the dense one (non-contiguous tokens)
    token_stride: int = 0                 # > 0: every tensor a view of one buffer with this token stride (elements)
    extra: int = 0                        # tokens past cu_seqlens[-1] in every tensor
    deterministic: bool = False
    seed: int = 0

    def describe(self) -> str:
        return (f"{self.dtype} d={self.dqk}/{self.dv} H={self.hq}/{self.hkv} lens={self.lens_q}/{self.lens_kv} "
                f"causal={self.causal} {self.alignment} band=({self.band_left},{self.band_right}) sink={self.sink} "
                f"used={self.used_q}/{self.used_kv} lse_tm={self.lse_token_major} spread={self.spread} "
                f"token_stride={self.token_stride} "
                f"extra={self.extra} det={self.deterministic} seed={self.seed}")


def _cu(lens) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")


def _thd(tokens, heads, dim, dtype, gen, spread: bool):
    """A random (T, H, D) tensor; ``spread``: a view with twice the dense token stride."""
    t = torch.randn((tokens, heads, dim * (2 if spread else 1)), generator=gen, device="cuda").to(dtype)
    return t[..., :dim] if spread else t


def _lse_buffer(heads, tokens, token_major: bool, fill=float("nan")):
    """(Hq, Tq) fp32, head-major or a transposed view of (Tq, Hq) memory."""
    if token_major:
        return torch.full((tokens, heads), fill, device="cuda").t()
    return torch.full((heads, tokens), fill, device="cuda")


class _SharedBuffer:
    """(T, H, D) tensors carved side by side from one (T, token_stride) buffer: each a view whose token stride is
    ``token_stride`` elements, so a late token's offset passes 2^31 (and 2^32) elements while every tensor holds only
    a few hundred tokens."""

    def __init__(self, tokens: int, token_stride: int, dtype):
        self.buf = torch.full((tokens, token_stride), float("nan"), dtype=dtype, device="cuda")
        self.next = 0

    def take(self, tokens: int, heads: int, dim: int):
        cols = heads * dim
        assert self.next + cols <= self.buf.shape[1]
        view = self.buf[:tokens, self.next:self.next + cols].view(tokens, heads, dim)
        self.next += cols
        return view


def _allocator(c: VarCase, tokens: int, dtype):
    """alloc(tokens, heads, dim) -> a NaN-filled (T, H, D) tensor: dense, or carved from a shared buffer with the
    case's token stride."""
    if not c.token_stride:
        return lambda t, h, d: torch.full((t, h, d), float("nan"), dtype=dtype, device="cuda")
    shared = _SharedBuffer(tokens, c.token_stride, dtype)
    return shared.take


def _inputs(c: VarCase):
    tdt = torch_dtype(c.dtype)
    gen = torch.Generator(device="cuda").manual_seed(c.seed)
    lens_kv = c.lens_q if c.lens_kv is None else c.lens_kv
    tq, tkv = sum(c.lens_q) + c.extra, sum(lens_kv) + c.extra
    shapes = ((tq, c.hq, c.dqk), (tkv, c.hkv, c.dqk), (tkv, c.hkv, c.dv), (tq, c.hq, c.dv))
    q, k, v, do = (_thd(t, h, d, tdt, gen, c.spread) for t, h, d in shapes)
    alloc = _allocator(c, max(tq, tkv), tdt)
    if c.token_stride:   # the same values, moved into views of the shared buffer
        q, k, v, do = (alloc(*x.shape).copy_(x) for x in (q, k, v, do))
    used = [None if u is None else torch.tensor(u, dtype=torch.int32, device="cuda") for u in (c.used_q, c.used_kv)]
    sink = None if c.sink is None else torch.tensor([c.sink * (-1) ** h for h in range(c.hq)], device="cuda")
    from frost.kernels.packed import Packed

    packed = Packed(_cu(c.lens_q), _cu(lens_kv), max(c.lens_q, default=0), max(lens_kv, default=0))
    mask = dict(causal=c.causal, alignment=c.alignment, band_left=c.band_left, band_right=c.band_right)
    return dict(q=q, k=k, v=v, do=do, used=used, sink=sink, packed=packed, mask=mask, scale=1 / math.sqrt(c.dqk),
                alloc=alloc)


def _logical(t):
    return t.transpose(0, 1)


def _reference_forward(inp, c: VarCase, dtype=None):
    from frost.reference.varlen import attention_forward_varlen

    cast = (lambda t: t) if dtype is None else (lambda t: None if t is None else t.to(dtype))
    p = inp["packed"]
    return attention_forward_varlen(
        cast(_logical(inp["q"])), cast(_logical(inp["k"])), cast(_logical(inp["v"])), p.cu_seqlens_q,
        p.cu_seqlens_kv, scale=inp["scale"], seqused_q=inp["used"][0], seqused_kv=inp["used"][1],
        sink=cast(inp["sink"]), **inp["mask"])


def _segment_rows(packed, tokens, used=None):
    """Bool (tokens,): rows inside a segment; and rows inside a segment but past seqused (padding)."""
    inside, pad = torch.zeros(tokens, dtype=torch.bool), torch.zeros(tokens, dtype=torch.bool)
    cu = packed.tolist()
    used = None if used is None else used.tolist()
    for b in range(len(cu) - 1):
        inside[cu[b]:cu[b + 1]] = True
        if used is not None:
            pad[cu[b] + used[b]:cu[b + 1]] = True
    return inside.cuda(), pad.cuda()


def _fa_rule(name, got, ref, lowp, scale, failed, report):
    finite = torch.isfinite(ref)
    if not torch.equal(torch.isfinite(got), finite) or not torch.equal(got[~finite], ref[~finite].to(got.dtype)):
        failed.append(f"{name}: non-finite entries differ from the oracle's ({int(torch.isnan(got).sum())} NaN)")
        return
    if not bool(finite.any()):
        return
    g, r, lo = got[finite].double(), ref[finite], lowp[finite].double()
    err, ref_err = (g - r).abs().max().item(), (lo - r).abs().max().item()
    bound = 2 * ref_err + FLOOR * r.abs().max().item() + NOISE * scale
    report.append(f"{name} err={err:.3e} ref_err={ref_err:.3e} bound={bound:.3e}")
    if not err <= bound:
        failed.append(f"{name}: {err:.3e} > {bound:.3e}")


def _untouched(name, t, inside, failed):
    """Rows outside every segment (token axis = dim 0 of ``t``) must still hold the NaN poison."""
    out = t[~inside]
    if out.numel() and not bool(torch.isnan(out).all()):
        failed.append(f"{name}: rows outside every segment were written")


def _run_forward(c: VarCase, inp):
    from frost.kernels.arch import detect_arch
    from frost.kernels.forward import choose_forward_config, compile_forward

    q, v = inp["q"], inp["v"]
    o = inp["alloc"](q.shape[0], c.hq, c.dv)
    lse = _lse_buffer(c.hq, q.shape[0], c.lse_token_major)
    fwd = compile_forward(choose_forward_config(c.dtype, c.dqk, c.dv, detect_arch(), varlen=True))
    fwd(_logical(q), _logical(inp["k"]), _logical(v), _logical(o), lse, scale=inp["scale"],
        seq_len_q=inp["used"][0], seq_len_kv=inp["used"][1], sink=inp["sink"], packed=inp["packed"],
        check_lengths=True, **inp["mask"])
    return o, lse


def check_forward(c: VarCase) -> list[str]:
    inp = _inputs(c)
    o64, lse64 = _reference_forward(inp, c, torch.float64)
    o_lp, lse_lp = _reference_forward(inp, c)
    o, lse = _run_forward(c, inp)
    torch.cuda.synchronize()
    inside, pad = _segment_rows(inp["packed"].cu_seqlens_q, o.shape[0], inp["used"][0])
    failed, report = [], []
    _untouched("o", o, inside, failed)
    _untouched("lse", lse.t(), inside, failed)
    rows = inside
    _fa_rule("o", _logical(o)[:, rows], o64[:, rows], o_lp[:, rows], 1.0, failed, report)
    _fa_rule("lse", lse[:, rows], lse64[:, rows], lse_lp[:, rows], 1.0, failed, report)
    if bool(pad.any()) and not bool((o[pad] == 0).all()):
        failed.append("o: padding rows (past seqused) not exactly zero")
    assert not failed, f"{failed} ({c.describe()}) {report}"
    return report


def _run_backward(c: VarCase, inp, o, lse):
    from frost.kernels import choose_config, compile_backward, detect_arch, workspace_regions

    q, k, v, do = inp["q"], inp["k"], inp["v"], inp["do"]
    p = inp["packed"]
    cfg = choose_config(c.dtype, c.dqk, c.dv, c.causal, c.alignment, detect_arch(), band_left=c.band_left,
                        band_right=c.band_right, deterministic=c.deterministic, varlen=True)
    ws = {name: torch.full((max(n, 16),), 0xFF, dtype=torch.uint8, device="cuda")
          for name, n in workspace_regions(cfg, p.batch, c.hq, p.max_seqlen_q, p.max_seqlen_kv,
                                           tokens_q=q.shape[0])}
    grads = [inp["alloc"](*t.shape) for t in (q, k, v)]
    dsink = None if inp["sink"] is None else torch.full_like(inp["sink"], float("nan"))
    compile_backward(cfg)(*(_logical(t) for t in (q, k, v, o, do)), lse, *(_logical(g) for g in grads),
                          scale=inp["scale"], workspace=ws, seq_len_q=inp["used"][0], seq_len_kv=inp["used"][1],
                          band_left=c.band_left, band_right=c.band_right, sink=inp["sink"], dsink=dsink,
                          deterministic=c.deterministic, check_lengths=True, packed=p)
    return (*grads, dsink)


def check_backward(c: VarCase) -> list[str]:
    from frost.reference.varlen import attention_backward_varlen

    inp = _inputs(c)
    o64, lse64 = _reference_forward(inp, c, torch.float64)
    o = inp["alloc"](inp["q"].shape[0], c.hq, c.dv).zero_()
    o_logical = _logical(o)
    o_logical.copy_(o64.to(o.dtype))
    lse = _lse_buffer(c.hq, o.shape[0], c.lse_token_major, fill=float("-inf"))
    lse.copy_(lse64.float())
    p = inp["packed"]

    def reference(dtype=None):
        cast = (lambda t: t) if dtype is None else (lambda t: None if t is None else t.to(dtype))
        return attention_backward_varlen(
            *(cast(_logical(inp[n])) for n in ("q", "k", "v")), cast(o_logical), cast(_logical(inp["do"])),
            cast(lse), p.cu_seqlens_q, p.cu_seqlens_kv, scale=inp["scale"], seqused_q=inp["used"][0],
            seqused_kv=inp["used"][1], sink=cast(inp["sink"]), **inp["mask"])

    oracle, lowp = reference(torch.float64), reference()
    got = _run_backward(c, inp, o, lse)
    torch.cuda.synchronize()
    failed, report = [], []
    scale = max([r.abs().max().item() for r in oracle[:3] if r.numel()] + [0.0])
    for name, g, ref, lo, cu, used in zip(("dq", "dk", "dv"), got, oracle, lowp,
                                          (p.cu_seqlens_q, p.cu_seqlens_kv, p.cu_seqlens_kv),
                                          (inp["used"][0], inp["used"][1], inp["used"][1])):
        inside, pad = _segment_rows(cu, g.shape[0], used)
        _untouched(name, g, inside, failed)
        _fa_rule(name, _logical(g)[:, inside], ref[:, inside], lo[:, inside], scale, failed, report)
        if bool(pad.any()) and not bool((g[pad] == 0).all()):
            failed.append(f"{name}: padding rows (past seqused) not exactly zero")
    if inp["sink"] is not None:
        _fa_rule("dsink", got[3], oracle[3], lowp[3], scale, failed, report)
    if c.deterministic:
        again = _run_backward(c, inp, o, lse)
        if not all(torch.equal(a.nan_to_num(), b.nan_to_num()) for a, b in zip(again[:3], got[:3])):
            failed.append("deterministic: two runs differ")
    assert not failed, f"{failed} ({c.describe()}) {report}"
    return report


def run_cases(check, cases) -> None:
    failures = []
    for c in cases:
        try:
            check(c)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)}/{len(cases)} failed:\n" + "\n".join(failures)


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
    cu_t = _cu(lens)
    cu = cu_t.tolist()
    q, k, v, do = (_thd(t, h, d, torch.bfloat16, gen, False) for h in (hq, hkv, hkv, hq))
    sink = torch.randn(hq, generator=gen, device="cuda") if with_sink else None
    lens_t = torch.tensor(lens, dtype=torch.int32, device="cuda")
    packed = Packed(cu_t, cu_t, s, s)
    o, lse = torch.full_like(q, float("nan")), torch.full((hq, t), float("nan"), device="cuda")
    compile_forward(choose_forward_config("bfloat16", d, d, arch, varlen=True))(
        _logical(q), _logical(k), _logical(v), _logical(o), lse, scale=scale, causal=causal, sink=sink, packed=packed)
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
    compile_backward(cfg)(*(_logical(x) for x in (q, k, v, o, do)), lse, *(_logical(g) for g in grads), scale=scale,
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
