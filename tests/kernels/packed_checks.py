"""The packed (varlen) kernel tests' cases and their checks, forward and backward, against the fp64 oracle run per
sequence (helpers/oracle_packed.py) under the FA rule (helpers/fa_rule.py), with lowp_reference frost.reference.varlen
in the io dtype:

    max|kernel - oracle| <= 2 * max|lowp_reference - oracle| + FLOOR * max|oracle| + NOISE * scale

(scale: 1 for O and LSE, the problem's largest |oracle| gradient for the gradients). Tensors are packed THD (tokens
of every sequence along axis 0). Outputs are poisoned with NaN: rows inside a segment must be written (O, LSE, dQ,
dK, dV; padding rows as exact zeros, LSE -inf), rows outside every segment must stay untouched (the kernels'
contract: the APIs hand out zeroed gradients). Deterministic mode must give bitwise equal gradients on two runs.
The engine under test is a parameter, so the checks themselves run on the CPU against the reference engine
(tests/kernels/test_kernel_checks.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from helpers import oracle_packed
from helpers.fa_rule import fa_rule
from helpers.tensors import cu_seqlens, int32, randn_thd
from kernel_oracle import torch_dtype


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


def logical(t):
    """A packed (T, H, D) tensor as the logical (H, T, D) view the kernels and frost.reference.varlen take."""
    return t.transpose(0, 1)


def lse_buffer(heads, tokens, token_major: bool, fill=float("nan"), device="cuda"):
    """(Hq, Tq) fp32, head-major or a transposed view of (Tq, Hq) memory."""
    if token_major:
        return torch.full((tokens, heads), fill, device=device).t()
    return torch.full((heads, tokens), fill, device=device)


class SharedBuffer:
    """(T, H, D) tensors carved side by side from one (T, token_stride) buffer: each a view whose token stride is
    ``token_stride`` elements, so a late token's offset passes 2^31 (and 2^32) elements while every tensor holds only
    a few hundred tokens."""

    def __init__(self, tokens: int, token_stride: int, dtype, device="cuda"):
        self.buf = torch.full((tokens, token_stride), float("nan"), dtype=dtype, device=device)
        self.next = 0

    def take(self, tokens: int, heads: int, dim: int):
        cols = heads * dim
        assert self.next + cols <= self.buf.shape[1]
        view = self.buf[:tokens, self.next:self.next + cols].view(tokens, heads, dim)
        self.next += cols
        return view


def _allocator(c: VarCase, tokens: int, dtype, device):
    """alloc(tokens, heads, dim) -> a NaN-filled (T, H, D) tensor: dense, or carved from a shared buffer with the
    case's token stride."""
    if not c.token_stride:
        return lambda t, h, d: torch.full((t, h, d), float("nan"), dtype=dtype, device=device)
    return SharedBuffer(tokens, c.token_stride, dtype, device).take


def inputs(c: VarCase, device="cuda"):
    from frost.kernels.packed import Packed

    tdt = torch_dtype(c.dtype)
    gen = torch.Generator(device=device).manual_seed(c.seed)
    lens_kv = c.lens_q if c.lens_kv is None else c.lens_kv
    tq, tkv = sum(c.lens_q) + c.extra, sum(lens_kv) + c.extra
    shapes = ((tq, c.hq, c.dqk), (tkv, c.hkv, c.dqk), (tkv, c.hkv, c.dv), (tq, c.hq, c.dv))
    q, k, v, do = (randn_thd(t, h, d, tdt, gen=gen, device=device, spread=c.spread) for t, h, d in shapes)
    alloc = _allocator(c, max(tq, tkv), tdt, device)
    if c.token_stride:   # the same values, moved into views of the shared buffer
        q, k, v, do = (alloc(*x.shape).copy_(x) for x in (q, k, v, do))
    used = [int32(u, device) for u in (c.used_q, c.used_kv)]
    sink = None if c.sink is None else torch.tensor([c.sink * (-1) ** h for h in range(c.hq)], device=device)
    packed = Packed(cu_seqlens(c.lens_q, device), cu_seqlens(lens_kv, device), max(c.lens_q, default=0),
                    max(lens_kv, default=0))
    mask = dict(causal=c.causal, alignment=c.alignment, band_left=c.band_left, band_right=c.band_right)
    return dict(q=q, k=k, v=v, do=do, used=used, sink=sink, packed=packed, mask=mask, scale=1 / math.sqrt(c.dqk),
                alloc=alloc)


def _segment_args(inp) -> dict:
    """The keyword arguments of frost.reference.varlen and the packed oracle: scale, seqused, sink, mask."""
    return dict(scale=inp["scale"], seqused_q=inp["used"][0], seqused_kv=inp["used"][1], sink=inp["sink"],
                **inp["mask"])


def segment_rows(cu, tokens, used=None):
    """Bool (tokens,) on cu's device: rows inside a segment; and rows inside a segment but past seqused (padding)."""
    inside, pad = torch.zeros(tokens, dtype=torch.bool), torch.zeros(tokens, dtype=torch.bool)
    bounds = cu.tolist()
    used = None if used is None else used.tolist()
    for b in range(len(bounds) - 1):
        inside[bounds[b]:bounds[b + 1]] = True
        if used is not None:
            pad[bounds[b] + used[b]:bounds[b + 1]] = True
    return inside.to(cu.device), pad.to(cu.device)


def _untouched(name, t, inside, failed):
    """Rows outside every segment (token axis = dim 0 of ``t``) must still hold the NaN poison."""
    out = t[~inside]
    if out.numel() and not bool(torch.isnan(out).all()):
        failed.append(f"{name}: rows outside every segment were written")


def kernel_forward(c: VarCase, inp, o, lse) -> None:
    """The engine under test on the GPU: the packed forward kernel, writing o (T, Hq, Dv) and lse (Hq, Tq)."""
    from frost.kernels.arch import detect_arch
    from frost.kernels.forward import choose_forward_config, compile_forward

    fwd = compile_forward(choose_forward_config(c.dtype, c.dqk, c.dv, detect_arch(), varlen=True))
    fwd(logical(inp["q"]), logical(inp["k"]), logical(inp["v"]), logical(o), lse, scale=inp["scale"],
        seq_len_q=inp["used"][0], seq_len_kv=inp["used"][1], sink=inp["sink"], packed=inp["packed"],
        check_lengths=True, **inp["mask"])
    torch.cuda.synchronize()


def check_forward(c: VarCase, run=kernel_forward, device="cuda") -> list[str]:
    """`run(c, inputs, o, lse)` fills the poisoned o and lse; O and LSE against the oracle under the FA rule."""
    from frost.reference.varlen import attention_forward_varlen

    inp = inputs(c, device)
    p, qkv = inp["packed"], [logical(inp[n]) for n in ("q", "k", "v")]
    o64, lse64 = oracle_packed.attention_forward_varlen(*qkv, p.cu_seqlens_q, p.cu_seqlens_kv, **_segment_args(inp))
    o_lp, lse_lp = attention_forward_varlen(*qkv, p.cu_seqlens_q, p.cu_seqlens_kv, **_segment_args(inp))
    o = inp["alloc"](inp["q"].shape[0], c.hq, c.dv)
    lse = lse_buffer(c.hq, o.shape[0], c.lse_token_major, device=device)
    run(c, inp, o, lse)
    inside, pad = segment_rows(p.cu_seqlens_q, o.shape[0], inp["used"][0])
    failed, report = [], []
    _untouched("o", o, inside, failed)
    _untouched("lse", lse.t(), inside, failed)
    fa_rule("o", logical(o)[:, inside], o64[:, inside], o_lp[:, inside], failed, report, noise_scale=1.0)
    fa_rule("lse", lse[:, inside], lse64[:, inside], lse_lp[:, inside], failed, report, noise_scale=1.0)
    if bool(pad.any()) and not bool((o[pad] == 0).all()):
        failed.append("o: padding rows (past seqused) not exactly zero")
    assert not failed, f"{failed} ({c.describe()}) {report}"
    return report


def kernel_backward(c: VarCase, inp, o, lse):
    """The engine under test on the GPU: the packed backward kernels on fresh NaN-poisoned gradients (and
    workspace); returns (dq, dk, dv, dsink or None), packed (T, H, D)."""
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
    compile_backward(cfg)(*(logical(t) for t in (q, k, v, o, do)), lse, *(logical(g) for g in grads),
                          scale=inp["scale"], workspace=ws, seq_len_q=inp["used"][0], seq_len_kv=inp["used"][1],
                          band_left=c.band_left, band_right=c.band_right, sink=inp["sink"], dsink=dsink,
                          deterministic=c.deterministic, check_lengths=True, packed=p)
    torch.cuda.synchronize()
    return (*grads, dsink)


def check_backward(c: VarCase, run=kernel_backward, device="cuda") -> list[str]:
    """`run(c, inputs, o, lse)` -> (dq, dk, dv, dsink) packed, on O and LSE of the oracle's forward (rounded to the
    io dtype and fp32); the gradients against the oracle under the FA rule."""
    from frost.reference.varlen import attention_backward_varlen

    inp = inputs(c, device)
    p, qkv = inp["packed"], [logical(inp[n]) for n in ("q", "k", "v")]
    o64, lse64 = oracle_packed.attention_forward_varlen(*qkv, p.cu_seqlens_q, p.cu_seqlens_kv, **_segment_args(inp))
    o = inp["alloc"](inp["q"].shape[0], c.hq, c.dv).zero_()
    logical(o).copy_(o64.to(o.dtype))
    lse = lse_buffer(c.hq, o.shape[0], c.lse_token_major, fill=float("-inf"), device=device)
    lse.copy_(lse64.float())
    args = (*qkv, logical(o), logical(inp["do"]), lse, p.cu_seqlens_q, p.cu_seqlens_kv)
    exact = oracle_packed.attention_backward_varlen(*args, **_segment_args(inp))
    lowp = attention_backward_varlen(*args, **_segment_args(inp))
    got = run(c, inp, o, lse)
    failed, report = [], []
    scale = max([r.abs().max().item() for r in exact[:3] if r.numel()] + [0.0])
    for name, g, ref, lo, cu, used in zip(("dq", "dk", "dv"), got, exact, lowp,
                                          (p.cu_seqlens_q, p.cu_seqlens_kv, p.cu_seqlens_kv),
                                          (inp["used"][0], inp["used"][1], inp["used"][1])):
        inside, pad = segment_rows(cu, g.shape[0], used)
        _untouched(name, g, inside, failed)
        fa_rule(name, logical(g)[:, inside], ref[:, inside], lo[:, inside], failed, report, noise_scale=scale)
        if bool(pad.any()) and not bool((g[pad] == 0).all()):
            failed.append(f"{name}: padding rows (past seqused) not exactly zero")
    if inp["sink"] is not None:
        fa_rule("dsink", got[3], exact[3], lowp[3], failed, report, noise_scale=scale)
    if c.deterministic:
        again = run(c, inp, o, lse)
        if not all(torch.equal(a.nan_to_num(), b.nan_to_num()) for a, b in zip(again[:3], got[:3])):
            failed.append("deterministic: two runs differ")
    assert not failed, f"{failed} ({c.describe()}) {report}"
    return report
