"""GPU tests of the non-finite contract (README, "Non-finite inputs") on the cute_sm120 kernels, forward and
backward, dense and packed, fp16 and bf16.

One problem (GQA 4:2, padded rows and keys, a batch whose rows see no key, a sink per head) with one value of q, k,
v, dO or the sink set to NaN or +-inf. The kernels run on the exact inputs the fp64 reference (frost.reference, which
the CPU tests hold to the contract entry by entry) gets, and must match its pattern exactly: the same NaN, +inf and
-inf entries, exact zeros where it has exact zeros (padding, rows that see no key, a +inf sink), finite values
elsewhere close to it. Without a mask no tile holds a hidden entry that a row could read, so nothing is left to tile
granularity; a causal case checks the documented spread within a tile (a NaN may reach hidden neighbours of its own
tile and kv head, never padding). Outputs are poisoned with NaN first, so an element left unwritten fails; packed
tensors carry NaN tokens past cu_seqlens[-1], which must stay unread (and their outputs untouched).

Compiles: forward and backward d64 in both dtypes, dense and packed, and the two deterministic bf16 sets whose
kernels write dQ themselves (ordered d64, dq_gemm d96; the ordered one's padded dQ rows are the documented
exception).

Run on the GPU machine: python3 -m pytest -m gpu tests/kernels/test_nonfinite_gpu.py"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

from kernel_oracle import run_backward, torch_dtype  # noqa: E402  (tests/kernels is on sys.path)

pytestmark = pytest.mark.gpu

NAN, INF = float("nan"), float("inf")
B, HQ, HKV, SQ, SKV = 3, 4, 2, 40, 48
LENS_Q, LENS_KV = [40, 29, 17], [48, 33, 0]   # batch 1: padded rows 29.. and keys 33..; batch 2 sees no key
SINK = [0.3, -0.7, 1.1, 0.0]
EXTRA = 5                                      # packed tokens past cu_seqlens[-1], NaN
DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class Poke:
    """One input value: ``what`` in q, k, v, do (a logical BHSD index) or sink (a head)."""

    what: str
    at: tuple
    value: float


POKES = {
    "nan q": Poke("q", (0, 1, 7, 3), NAN),
    "nan q padded row": Poke("q", (1, 2, 33, 0), NAN),
    "nan k": Poke("k", (1, 0, 5, 9), NAN),
    "nan k padded key": Poke("k", (1, 1, 40, 2), NAN),
    "nan v": Poke("v", (0, 1, 11, 4), NAN),
    "nan dO": Poke("do", (1, 3, 8, 5), NAN),
    "nan dO padded row": Poke("do", (1, 0, 35, 1), NAN),
    "nan dO row without keys": Poke("do", (2, 0, 3, 1), NAN),
    "+inf k": Poke("k", (1, 0, 20, 6), INF),
    "sink +inf": Poke("sink", (2,), INF),
    "sink -inf": Poke("sink", (1,), -INF),
    "sink nan": Poke("sink", (3,), NAN),
}
FORWARD_POKES = {name: p for name, p in POKES.items() if p.what != "do"}


def _inputs(dtype: str, poke: Poke, d: int = 64, seed: int = 0) -> dict:
    """q, k, v, dO (logical BHSD views of BSHD memory, io dtype), the fp32 sink and the lengths, with the poke
    applied. For an infinite key the q column it meets is positive on head 0 and negative on head 1 of its batch, so
    one head's rows score +inf and the other's -inf."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    tdt = torch_dtype(dtype)

    def rand(b, h, s, dim):
        return torch.randn((b, s, h, dim), generator=gen, device="cuda").to(tdt).transpose(1, 2)

    t = dict(q=rand(B, HQ, SQ, d), k=rand(B, HKV, SKV, d), v=rand(B, HKV, SKV, d), do=rand(B, HQ, SQ, d),
             sink=torch.tensor(SINK, dtype=torch.float32, device="cuda"))
    if poke.what == "k" and math.isinf(poke.value):
        b, _, _, col = poke.at
        t["q"][b, 0, :, col] = t["q"][b, 0, :, col].abs() + 0.25
        t["q"][b, 1, :, col] = -(t["q"][b, 1, :, col].abs() + 0.25)
    t[poke.what][poke.at] = poke.value
    t["lens_q"] = torch.tensor(LENS_Q, dtype=torch.int32, device="cuda")
    t["lens_kv"] = torch.tensor(LENS_KV, dtype=torch.int32, device="cuda")
    t["scale"] = 1.0 / math.sqrt(d)
    return t


def _mask(causal: bool) -> dict:
    return dict(causal=causal, alignment="top_left", band_left=None, band_right=None)


def _reference(t: dict, causal: bool = False, o=None, lse=None) -> dict:
    """fp64 frost.reference on the kernel's exact inputs: the forward, and the backward from (o, lse) (the
    reference forward's own when None)."""
    from frost import reference

    q, k, v, do = (t[n].double() for n in ("q", "k", "v", "do"))
    kw = dict(scale=t["scale"], seq_len_q=t["lens_q"], seq_len_kv=t["lens_kv"], sink=t["sink"].double(),
              **_mask(causal))
    o64, lse64 = reference.attention_forward(q, k, v, **kw)
    o_in = o64 if o is None else o.double()
    lse_in = lse64 if lse is None else lse.double()
    dq, dk, dv, dsink = reference.attention_backward(q, k, v, o_in, do, lse_in, **kw)
    return dict(o=o64, lse=lse64, dq=dq, dk=dk, dv=dv, dsink=dsink)


def _thd(x: torch.Tensor, extra: int = EXTRA) -> torch.Tensor:
    """A dense (B, H, S, D) view -> packed (B * S + extra, H, D) tokens (whole segments; the lengths become
    seqused), NaN past the end."""
    b, h, s, d = x.shape
    out = torch.full((b * s + extra, h, d), NAN, dtype=x.dtype, device=x.device)
    out[:b * s] = x.transpose(1, 2).reshape(b * s, h, d)
    return out


def _dense(x: torch.Tensor, b: int, s: int) -> torch.Tensor:
    """Packed (T, H, D) tokens -> the dense (B, H, S, D) view of their first B * S."""
    return x[:b * s].reshape(b, s, *x.shape[1:]).transpose(1, 2)


def _packed_segments():
    from frost.kernels.packed import Packed

    cu = lambda s: torch.arange(0, (B + 1) * s, s, dtype=torch.int32, device="cuda")  # noqa: E731
    return Packed(cu(SQ), cu(SKV), SQ, SKV)


def _forward(t: dict, dtype: str, packed: bool, causal: bool = False):
    """The forward kernel -> (O, LSE) as dense (B, H, S, D) and (B, H, S); packed outputs past the segments are
    checked untouched (still NaN)."""
    from frost.kernels.arch import detect_arch
    from frost.kernels.forward import choose_forward_config, compile_forward

    fwd = compile_forward(choose_forward_config(dtype, t["q"].shape[3], t["v"].shape[3], detect_arch(),
                                                varlen=packed))
    kw = dict(scale=t["scale"], seq_len_q=t["lens_q"], seq_len_kv=t["lens_kv"], sink=t["sink"], **_mask(causal))
    if not packed:
        o = torch.full((B, SQ, HQ, t["v"].shape[3]), NAN, dtype=t["q"].dtype, device="cuda").transpose(1, 2)
        lse = torch.full((B, HQ, SQ), NAN, device="cuda")
        fwd(t["q"], t["k"], t["v"], o, lse, **kw)
        return o, lse
    q, k, v = (_thd(t[n]) for n in ("q", "k", "v"))
    o = torch.full((q.shape[0], HQ, t["v"].shape[3]), NAN, dtype=q.dtype, device="cuda")
    lse = torch.full((HQ, q.shape[0]), NAN, device="cuda")
    fwd(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), o.transpose(0, 1), lse, packed=_packed_segments(),
        check_lengths=True, **kw)
    torch.cuda.synchronize()
    assert torch.isnan(o[B * SQ:]).all() and torch.isnan(lse[:, B * SQ:]).all(), "tokens past the segments written"
    return _dense(o, B, SQ), lse[:, :B * SQ].reshape(HQ, B, SQ).transpose(0, 1)


def _backward(t: dict, o, lse, dtype: str, packed: bool, deterministic: bool = False, causal: bool = False):
    """The backward kernels -> (dQ, dK, dV) dense (B, H, S, D), and dsink."""
    from frost.kernels import choose_config, compile_backward, detect_arch, workspace_regions

    d, dv = t["q"].shape[3], t["v"].shape[3]
    cfg = choose_config(dtype, d, dv, causal, "top_left", detect_arch(), deterministic=deterministic,
                        gqa_group=HQ // HKV, varlen=packed)
    feats = dict(seq_len_q=t["lens_q"], seq_len_kv=t["lens_kv"], band_left=None, band_right=None, sink=t["sink"],
                 deterministic=deterministic)
    if not packed:
        return run_backward(compile_backward(cfg), cfg, t["q"], t["k"], t["v"], o, t["do"], lse, t["scale"],
                            dlse=None, **feats)
    p = _packed_segments()
    q, k, v, do = (_thd(t[n]) for n in ("q", "k", "v", "do"))
    o_thd = _thd(o, 0)
    o_p = torch.full((q.shape[0], HQ, dv), NAN, dtype=q.dtype, device="cuda")
    o_p[:B * SQ] = o_thd
    lse_p = torch.full((HQ, q.shape[0]), NAN, device="cuda")
    lse_p[:, :B * SQ] = lse.transpose(0, 1).reshape(HQ, B * SQ)
    ws = {name: torch.full((max(n, 16),), 0xFF, dtype=torch.uint8, device="cuda")
          for name, n in workspace_regions(cfg, B, HQ, SQ, SKV, tokens_q=q.shape[0])}
    grads = [torch.full_like(x, NAN) for x in (q, k, v)]
    dsink = torch.full_like(t["sink"], NAN)
    compile_backward(cfg)(*(x.transpose(0, 1) for x in (q, k, v, o_p, do)), lse_p,
                          *(g.transpose(0, 1) for g in grads), scale=t["scale"], workspace=ws, dsink=dsink,
                          check_lengths=True, packed=p, **feats)
    torch.cuda.synchronize()
    for name, g, n in zip(("dq", "dk", "dv"), grads, (B * SQ, B * SKV, B * SKV)):
        assert torch.isnan(g[n:]).all(), f"{name}: tokens past the segments written"
    return _dense(grads[0], B, SQ), _dense(grads[1], B, SKV), _dense(grads[2], B, SKV), dsink


def _same_pattern(name: str, got, want, failed: list) -> None:
    """NaN, +inf and -inf exactly where the reference has them, exact zeros where it has exact zeros, finite values
    close to it elsewhere (value accuracy proper is the other GPU tests' job)."""
    got, want = got.double(), want.double()
    for kind, test in (("NaN", torch.isnan), ("+inf", torch.isposinf), ("-inf", torch.isneginf)):
        differ = test(got) ^ test(want)
        if differ.any():
            failed.append(f"{name}: {kind} differs at {differ.nonzero().tolist()[:6]} ({int(differ.sum())} entries)")
    zero = want == 0
    if not bool((got[zero] == 0).all()):
        failed.append(f"{name}: not exactly 0 at {(zero & (got != 0)).nonzero().tolist()[:6]}")
    both = torch.isfinite(got) & torch.isfinite(want)
    if bool(both.any()):
        scale = want[both].abs().max().item()
        err = (got[both] - want[both]).abs().max().item()
        if not err <= 0.05 * scale + 0.02:
            failed.append(f"{name}: finite values off by {err:.3e} (scale {scale:.3e})")


@pytest.mark.parametrize("packed", [False, True], ids=["dense", "packed"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_follows_the_contract(dtype, packed) -> None:
    failed = []
    for name, poke in FORWARD_POKES.items():
        t = _inputs(dtype, poke)
        o, lse = _forward(t, dtype, packed)
        torch.cuda.synchronize()
        want = _reference(t)
        _same_pattern(f"{name}: o", o, want["o"], failed)
        _same_pattern(f"{name}: lse", lse, want["lse"], failed)
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("packed", [False, True], ids=["dense", "packed"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_follows_the_contract(dtype, packed) -> None:
    """The backward from the reference forward's O (io dtype) and LSE (fp32): NaN O and LSE where the contract puts
    them, LSE = +inf under a +inf sink or score, -inf on rows that see no key."""
    failed = []
    for name, poke in POKES.items():
        t = _inputs(dtype, poke)
        fwd = _reference(t)
        o, lse = fwd["o"].to(t["q"].dtype), fwd["lse"].float()
        got = _backward(t, o, lse, dtype, packed)
        torch.cuda.synchronize()
        want = _reference(t, o=o, lse=lse)
        for out, g in zip(("dq", "dk", "dv", "dsink"), got):
            _same_pattern(f"{name}: {out}", g, want[out], failed)
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("d", [64, 96], ids=["ordered-d64", "dq_gemm-d96"])
def test_backward_sets_that_write_dq_themselves(d) -> None:
    """Deterministic mode's sets whose kernels write dQ: the dq_gemm kernel leaves padded rows to the preprocess's
    zeros, also where a non-finite key of their tile reaches them; the ordered set's main kernel writes them, NaN
    there (docs/nonfinite.md): only padded rows of the poked batch's kv group, everything else as the contract."""
    from frost.kernels import choose_config, detect_arch
    from frost.kernels.mask import main_writes_dq

    cfg = choose_config("bfloat16", d, d, False, "top_left", detect_arch(), deterministic=True, gqa_group=HQ // HKV)
    ordered = main_writes_dq(cfg.key.tile.dq_direct, cfg.key.ordered)
    assert ordered or cfg.key.dq_gemm, cfg.key
    failed = []
    for name in ("nan k", "+inf k", "nan v", "sink nan"):
        poke = POKES[name]
        t = _inputs("bfloat16", poke, d=d)
        fwd = _reference(t)
        o, lse = fwd["o"].to(t["q"].dtype), fwd["lse"].float()
        got = list(_backward(t, o, lse, "bfloat16", packed=False, deterministic=True))
        torch.cuda.synchronize()
        want = _reference(t, o=o, lse=lse)
        if ordered and poke.what in ("k", "v"):
            padded = (torch.arange(SQ, device="cuda")[None] >= t["lens_q"][:, None].long())[:, None, :, None]
            gap = padded.expand_as(got[0]) & torch.isnan(got[0]) & (want["dq"] == 0)
            b, kv = poke.at[:2]
            stray = gap.clone()
            stray[b, kv * 2:kv * 2 + 2] = False
            if stray.any():
                failed.append(f"{name}: dq NaN in padded rows outside batch {b}, kv head {kv}")
            got[0] = torch.where(gap, torch.zeros_like(got[0]), got[0])
        for out, g in zip(("dq", "dk", "dv", "dsink"), got):
            _same_pattern(f"{name}: {out}", g, want[out], failed)
    assert not failed, "\n".join(failed)


def _outside(got, want, allowed) -> list:
    """Entries non-finite in ``got`` but not in ``want`` that lie outside ``allowed`` (bool, like got)."""
    extra = ~torch.isfinite(got) & torch.isfinite(want)
    return (extra & ~allowed).nonzero().tolist()[:6]


def test_masked_spread_stays_in_its_tile_and_never_reaches_padding() -> None:
    """With a causal mask a tile may hold hidden entries, and P = 0 or dS = 0 there meets a NaN: the kernels'
    documented spread. Every reference NaN is a kernel NaN; the extra ones stay in the poked value's batch, kv head's
    query heads and (forward) head-dim column, and never reach a padded row or key or a row that sees no key."""
    failed = []
    t = _inputs("bfloat16", POKES["nan v"])
    o, lse = _forward(t, "bfloat16", packed=False, causal=True)
    torch.cuda.synchronize()
    want = _reference(t, causal=True)
    b, kv, _, col = POKES["nan v"].at
    allowed = torch.zeros_like(o, dtype=torch.bool)
    allowed[b, kv * 2:kv * 2 + 2, :LENS_Q[b], col] = True
    if bool((torch.isnan(want["o"]) & ~torch.isnan(o)).any()):
        failed.append("o: a reference NaN is finite in the kernel")
    if _outside(o, want["o"], allowed):
        failed.append(f"o: NaN outside the key's batch, group and column at {_outside(o, want['o'], allowed)}")

    t = _inputs("bfloat16", POKES["nan q"])
    fwd = _reference(t, causal=True)
    o, lse = fwd["o"].to(t["q"].dtype), fwd["lse"].float()
    dq, dk, dv, dsink = _backward(t, o, lse, "bfloat16", packed=False, causal=True)
    torch.cuda.synchronize()
    want = _reference(t, causal=True, o=o, lse=lse)
    b, h, _, _ = POKES["nan q"].at
    keys = torch.zeros_like(dk, dtype=torch.bool)
    keys[b, h // 2, :LENS_KV[b]] = True
    for name, g in (("dq", dq), ("dk", dk), ("dv", dv), ("dsink", dsink)):
        if bool((torch.isnan(want[name]) & ~torch.isnan(g)).any()):
            failed.append(f"{name}: a reference NaN is finite in the kernel")
    for name, g, allowed in (("dk", dk, keys), ("dv", dv, keys), ("dq", dq, torch.zeros_like(dq, dtype=torch.bool))):
        if _outside(g, want[name], allowed):
            failed.append(f"{name}: NaN outside the row's batch and kv head at {_outside(g, want[name], allowed)}")
    assert not failed, "\n".join(failed)
