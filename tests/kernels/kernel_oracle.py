"""Shared helpers of the GPU kernel tests: inputs, the fp64 oracle, the kernel call and the FA rule.

FA rule, per gradient:

    max|kernel - oracle| <= 2 * max|lowp_reference - oracle| + FLOOR * max|oracle| + NOISE * scale

where the oracle is frost.reference in fp64 on the exact kernel inputs (upcast), lowp_reference is
frost.reference in the io dtype (fp32 compute, P and dS rounded like a kernel) and scale is the largest |oracle|
of the gradients of the problem. FLOOR = 1e-3 covers gradients the low-precision reference gets (near) exactly;
it is below one bf16 ulp (2^-8 relative) and near one fp16 ulp (2^-10), so a real error cannot hide under it.
NOISE = 2^-20 (16 fp32 ulps of the problem's gradient scale) covers gradients that are exactly 0 in exact
arithmetic but come out of any fp32 accumulation as rounding noise (e.g. Skv = 1: P = 1, O = V, so dS = dP - delta
cancels to ~1e-7 in fp32). Outputs (and the workspace) are poisoned with NaN before each call: an element the
kernels do not write fails."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

FLOOR = 1e-3
NOISE = 2.0 ** -20


def torch_dtype(name):
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def rand(shape, dtype, layout, gen):
    """Random (B, H, S, D) tensor; "bshd" gives the transposed view of BSHD memory."""
    b, h, s, d = shape
    if layout == "bshd":
        return torch.randn((b, s, h, d), generator=gen, device="cuda").to(dtype).transpose(1, 2)
    return torch.randn((b, h, s, d), generator=gen, device="cuda").to(dtype)


def poisoned_like(t):
    out = torch.empty_like(t)
    out.fill_(float("nan"))
    return out


def make_workspace(cfg, b, hq, sq, skv, hkv=None):
    from frost.kernels import workspace_regions

    ws = {}
    for name, n in workspace_regions(cfg, b, hq, sq, skv, heads_kv=hkv):
        ws[name] = torch.empty(max(n, 16), dtype=torch.uint8, device="cuda")
        ws[name].fill_(0xFF)  # NaN pattern in fp32 (and -1 in int32): the kernels must initialise what they read
    return ws


def run_backward(bwd, cfg, q, k, v, o, do, lse, scale, **features):
    """One kernel call on fresh NaN-poisoned outputs; returns (dq, dk, dv, dsink or None)."""
    ws = make_workspace(cfg, q.shape[0], q.shape[1], q.shape[2], k.shape[2], k.shape[1])
    dq, dk, dv = poisoned_like(q), poisoned_like(k), poisoned_like(v)
    dsink = None
    if features.get("sink") is not None:
        dsink = torch.full_like(features["sink"], float("nan"))
    bwd(q, k, v, o, do, lse, dq, dk, dv, scale=scale, workspace=ws, dsink=dsink, **features)
    return dq, dk, dv, dsink


@dataclass
class Case:
    """One backward problem. Lengths are per-batch lists (None = full); sink is a list of Hq floats or a scalar."""

    dtype: str = "bfloat16"
    dqk: int = 64
    dv: int = 64
    b: int = 1
    hq: int = 2
    hkv: int = 2
    sq: int = 77
    skv: int = 77
    causal: bool = False
    alignment: str = "top_left"
    band_left: int | None = None
    band_right: int | None = None
    seq_len_q: list | None = None
    seq_len_kv: list | None = None
    sink: object = None
    dlse: bool = False   # a random gradient on the forward's LSE output (a strided (B, Hq, Sq) view)
    deterministic: bool = False
    layout: str = "bshd"
    seed: int = 0
    tag: str = field(default="")

    def describe(self) -> str:
        return (f"{self.dtype} d={self.dqk}/{self.dv} B={self.b} H={self.hq}/{self.hkv} S={self.sq}/{self.skv} "
                f"causal={self.causal} {self.alignment} band=({self.band_left},{self.band_right}) "
                f"lens=({self.seq_len_q},{self.seq_len_kv}) sink={self.sink} dlse={self.dlse} det={self.deterministic} "
                f"{self.layout} seed={self.seed} {self.tag}")


def build_inputs(c: Case):
    """Kernel inputs plus the reference keyword arguments (O and LSE from the fp64 forward)."""
    from frost import reference

    tdt = torch_dtype(c.dtype)
    gen = torch.Generator(device="cuda").manual_seed(c.seed)
    q = rand((c.b, c.hq, c.sq, c.dqk), tdt, c.layout, gen)
    k = rand((c.b, c.hkv, c.skv, c.dqk), tdt, c.layout, gen)
    v = rand((c.b, c.hkv, c.skv, c.dv), tdt, c.layout, gen)
    do = rand((c.b, c.hq, c.sq, c.dv), tdt, c.layout, gen)
    lens_q = None if c.seq_len_q is None else torch.tensor(c.seq_len_q, dtype=torch.int32, device="cuda")
    lens_kv = None if c.seq_len_kv is None else torch.tensor(c.seq_len_kv, dtype=torch.int32, device="cuda")
    sink = None
    if c.sink is not None:
        vals = c.sink if isinstance(c.sink, (list, tuple)) else [float(c.sink)] * c.hq
        sink = torch.tensor(vals, dtype=torch.float32, device="cuda")
    kw = dict(scale=1.0 / math.sqrt(c.dqk), causal=c.causal, alignment=c.alignment, band_left=c.band_left,
              band_right=c.band_right, seq_len_q=lens_q, seq_len_kv=lens_kv)
    o64, lse64 = reference.attention_forward(q.double(), k.double(), v.double(), sink=_dbl(sink), **kw)
    o, lse = o64.to(tdt), lse64.float()
    dlse = None
    if c.dlse:  # every other row of a wider buffer: the kernels take its strides
        dlse = torch.randn((c.b, c.hq, 2 * c.sq), generator=gen, device="cuda")[..., ::2]
    return dict(q=q, k=k, v=v, o=o, do=do, lse=lse, sink=sink, dlse=dlse, kw=kw)


def _dbl(t):
    return None if t is None else t.double()


def kernel_features(c: Case, inp) -> dict:
    kw = inp["kw"]
    return dict(seq_len_q=kw["seq_len_q"], seq_len_kv=kw["seq_len_kv"], band_left=c.band_left,
                band_right=c.band_right, sink=inp["sink"], dlse=inp["dlse"], deterministic=c.deterministic)


def compiled(c: Case):
    from frost.kernels import choose_config, compile_backward, detect_arch

    # (the mode and band pick the set as the engine's do: deterministic mode at d96/d128 on wide bands takes the
    # dq_gemm set, whose workspace make_workspace then sizes)
    cfg = choose_config(c.dtype, c.dqk, c.dv, c.causal, c.alignment, detect_arch(), band_left=c.band_left,
                        band_right=c.band_right, deterministic=c.deterministic)
    return cfg, compile_backward(cfg)


def _padded_rows_zero(name, g, lens):
    """Rows past each batch's length must be exact zeros."""
    if lens is None:
        return []
    bad = []
    for bi, n in enumerate(lens.tolist()):
        tail = g[bi, :, n:]
        if tail.numel() and not bool((tail == 0).all()):
            bad.append(f"{name}: batch {bi} rows >= {n} not exactly zero")
    return bad


def check_case(c: Case) -> list[str]:
    """Run the kernel on case c and compare with the oracle under the FA rule; returns a report (asserts)."""
    from frost import reference

    inp = build_inputs(c)
    q, k, v, o, do, lse, sink, kw = (inp[n] for n in ("q", "k", "v", "o", "do", "lse", "sink", "kw"))
    dlse = inp["dlse"]
    oracle = reference.attention_backward(q.double(), k.double(), v.double(), o.double(), do.double(),
                                          lse.double(), sink=_dbl(sink), dlse=_dbl(dlse), **kw)
    lowp = reference.attention_backward(q, k, v, o, do, lse, sink=sink, dlse=dlse, **kw)
    cfg, bwd = compiled(c)
    got = run_backward(bwd, cfg, q, k, v, o, do, lse, kw["scale"], **kernel_features(c, inp))
    torch.cuda.synchronize()
    names = ("dq", "dk", "dv", "dsink")
    grad_scale = max([r.abs().max().item() for r in oracle[:3] if r.numel()] + [0.0])
    report, failed = [], []
    for name, g, ref, lo in zip(names, got, oracle, lowp):
        if ref is None:
            assert g is None
            continue
        assert torch.isfinite(g).all(), f"{name}: non-finite values (unwritten or NaN) {c.describe()}"
        if not g.numel():
            continue
        err = (g.double() - ref).abs().max().item()
        ref_err = (lo.double() - ref).abs().max().item()
        bound = 2 * ref_err + FLOOR * ref.abs().max().item() + NOISE * grad_scale
        report.append(f"{name} err={err:.3e} ref_err={ref_err:.3e} bound={bound:.3e}")
        if not err <= bound:
            failed.append(f"{name}: {err:.3e} > {bound:.3e}")
    failed += _padded_rows_zero("dq", got[0], kw["seq_len_q"])
    failed += _padded_rows_zero("dk", got[1], kw["seq_len_kv"]) + _padded_rows_zero("dv", got[2], kw["seq_len_kv"])
    assert not failed, f"{failed} ({c.describe()}) {report}"
    return report


def run_cases(cases) -> None:
    """Check every case; one assertion listing all failures."""
    failures = []
    for c in cases:
        try:
            check_case(c)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)}/{len(cases)} failed:\n" + "\n".join(failures)
