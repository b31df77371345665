"""Backward TFLOP/s of frost's kernels vs torch SDPA's flash backend (FA2), same process, same inputs.

    python3 benchmarks/bench_kernels.py [--dtype bfloat16] [--iters 20] [--variants d64_n64m64,...]
    python3 benchmarks/bench_kernels.py --features     # the features: GQA, sink, sliding window, deterministic
    python3 benchmarks/bench_kernels.py --narrow-v     # 192/128 head dims: narrow V tiles vs V padded to 192
    python3 benchmarks/bench_kernels.py --deterministic 32,48,64,96,128,160  # deterministic / default mode per D

B=4, H=16, S=4096, D=64/128, causal and not. Inputs are transposed views of BSHD memory (the layout both
consume without copies). Backward FLOPs = 2.5 x forward, forward = 4*B*H*Sq*Skv*D, halved for causal.
Times: CUDA events around each call after warm-up, median (frost.bench.timing). --variants also times tile configs from
bench_variants.py (tuning only)."""

import argparse
import math
import os
import sys
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from frost.bench.timing import median_ms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _time(fn, iters: int, warmup: int = 3) -> float:
    """Median ms of ``iters`` calls after ``warmup`` (frost.bench.timing: CUDA events, host work hidden)."""
    return median_ms(lambda _: fn(), 1, warmup=warmup, iters=iters, max_seconds=3600.0).ms  # no time cap


class Case:
    def __init__(self, b, h, s, d, causal, dtype, dv=None):
        self.b, self.h, self.s, self.d, self.causal, self.dtype = b, h, s, d, causal, dtype
        self.dv = dv = dv or d

        def bshd(dim):
            return torch.randn((b, s, h, dim), device="cuda", dtype=dtype).transpose(1, 2)

        self.q, self.k, self.v, self.do = bshd(d), bshd(d), bshd(dv), bshd(dv)
        self.scale = 1 / math.sqrt(d)
        self.qg, self.kg, self.vg = (t.clone().requires_grad_() for t in (self.q, self.k, self.v))
        if dv == d:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                self.out = F.scaled_dot_product_attention(self.qg, self.kg, self.vg, is_causal=causal,
                                                          scale=self.scale)
            # LSE of the same forward, from the flash op itself (natural log, fp32)
            o, lse = torch.ops.aten._scaled_dot_product_flash_attention(self.q, self.k, self.v, is_causal=causal,
                                                                        scale=self.scale)[:2]
            self.o, self.lse = o, lse[..., :s]
        else:  # timing only: realistic magnitudes are enough (flash needs equal head dims)
            self.o, self.lse = torch.randn_like(self.do), torch.randn((b, h, s), device="cuda") + 8
        self.flops = 2.5 * 2 * b * h * s * s * (d + dv) * (0.5 if causal else 1.0)

    def torch_grads(self):
        return torch.autograd.grad(self.out, (self.qg, self.kg, self.vg), self.do, retain_graph=True)

    def time_torch(self, iters):
        return _time(self.torch_grads, iters)

    def frost_fn(self, tile=None):
        return _frost_fn(self, self.h, self.h, self.causal, tile)

    def max_diff(self, fn):
        ref = self.torch_grads()
        got = fn()
        return max((a.float() - r.float()).abs().max().item() for a, r in zip(got, ref))


class GqaCase:
    """(B, Hq, Hkv, S, D) causal, BSHD memory; O and LSE from torch flash on expanded K/V (timing only needs
    realistic magnitudes, so the sink variants reuse this LSE)."""

    def __init__(self, b, hq, hkv, s, d, dtype):
        self.b, self.hq, self.hkv, self.s, self.d, self.dv, self.dtype = b, hq, hkv, s, d, d, dtype

        def bshd(h):
            return torch.randn((b, s, h, d), device="cuda", dtype=dtype).transpose(1, 2)

        self.q, self.k, self.v, self.do = bshd(hq), bshd(hkv), bshd(hkv), bshd(hq)
        self.scale = 1 / math.sqrt(d)
        g = hq // hkv
        ke, ve = (t.repeat_interleave(g, dim=1) for t in (self.k, self.v))
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention(self.q, ke, ve, is_causal=True,
                                                                    scale=self.scale)[:2]
        self.o, self.lse = o, lse[..., :s].contiguous()
        self.sink = torch.randn(hq, device="cuda")
        self.dsink = torch.empty_like(self.sink)

    def torch_fn(self):
        """torch flash backward with enable_gqa (K/V not expanded)."""
        qg, kg, vg = (t.clone().requires_grad_() for t in (self.q, self.k, self.v))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True, scale=self.scale, enable_gqa=True)
        return lambda: torch.autograd.grad(out, (qg, kg, vg), self.do, retain_graph=True)

    def frost_fn(self, **features):
        if features.pop("with_sink", False):
            features.update(sink=self.sink, dsink=self.dsink)
        return _frost_fn(self, self.hq, self.hkv, True, None, **features)


def _frost_fn(case, heads, heads_kv, causal, tile=None, **features):
    """A closure running frost's backward on ``case``'s tensors (B, S, D and dtype from the case) into fixed grads;
    ``tile`` swaps in a tuning variant for the table's tile config; ``features`` go to every call."""
    from frost.kernels import choose_config, detect_arch, workspace_regions
    from frost.kernels.backward.api import CompiledBackward
    from frost.kernels.backward.compile import compile_kernels
    from frost.kernels.backward.catalogue import has_mha_set
    from frost.kernels.backward.select import KernelKey, narrow_band_set, orders_dq
    from frost.spec import caller_mask

    name = {torch.bfloat16: "bfloat16", torch.float16: "float16"}[case.dtype]
    band = {"band_left": features.get("band_left"), "band_right": features.get("band_right")}
    deterministic = features.get("deterministic", False)
    cfg = choose_config(name, case.d, case.dv, causal, "top_left", detect_arch(), deterministic=deterministic,
                        gqa_group=heads // heads_kv, **band)
    if tile is not None:  # the variant's pad sizes the dQ accumulator (it may pad wider than the served tile), and
        # the variant decides whether the problem orders dQ and gets the MHA or the narrow-band set (the kernel set
        # it is compiled as, with that set's ptxas options)
        mask = caller_mask(causal, "top_left", **band)
        ordered = orders_dq(tile, mask, deterministic)
        mha = heads == heads_kv and has_mha_set(tile.head_dim_pad, tile.head_dim_v_pad, ordered)
        cfg = replace(cfg, key=KernelKey(name, tile.head_dim_pad, cfg.arch, tile.head_dim_v_pad, ordered, mha,
                                         narrow=ordered and narrow_band_set(tile, mask)))
    # a variant runs as compiled (selected): its set is the one it was compiled as
    kernels = None if tile is None else compile_kernels(cfg.key, tile=tile)
    bwd = CompiledBackward(cfg, kernels, selected=tile is not None)
    ws = {n: torch.empty(max(x, 16), dtype=torch.uint8, device="cuda")
          for n, x in workspace_regions(cfg, case.b, heads, case.s, case.s, heads_kv=heads_kv)}
    grads = tuple(torch.empty_like(t) for t in (case.q, case.k, case.v))

    def run():
        bwd(case.q, case.k, case.v, case.o, case.do, case.lse, *grads, scale=case.scale, workspace=ws, **features)
        return grads

    return run


def bench_narrow_v(dtype, iters):
    """192/128 head dims (DeepSeek-style MLA) at B4 H16 S4096: the served tile (128-wide V tiles) against the same
    shape on the 192/192 tile (V padded to 192), frost only (torch's flash backend needs equal head dims)."""
    from frost.kernels.backward.catalogue import tile_for

    print(f"{'shape':>34} | {'narrow V ms':>11} {'padded V ms':>11} | padded / narrow | max|narrow-padded|")
    for causal in (False, True):
        case = Case(4, 16, 4096, 192, causal, dtype, dv=128)
        narrow, padded = case.frost_fn(), case.frost_fn(tile_for(192, 192))
        t_n, t_p = _time(narrow, iters), _time(padded, iters)
        diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(narrow(), padded()))
        print(f"{'4,16,4096,192/128 causal=' + str(causal):>34} | {t_n:11.3f} {t_p:11.3f} | {t_p / t_n:14.3f}x | "
              f"{diff:.2e}", flush=True)


def bench_features(dtype, iters):
    """The feature benchmarks: gpt-oss shape with/without sink, 128-token window + sink, deterministic; GQA
    2,32,8,4096,128 vs torch flash (enable_gqa)."""
    print(f"{'case':>44} | {'ms':>8} | vs")
    gpt = GqaCase(2, 64, 8, 4096, 64, dtype)
    base = _time(gpt.frost_fn(), iters)

    def row(name, t, ref=base):
        print(f"{name:>44} | {t:8.3f} | " + (f"{t / ref:5.3f}x frost causal" if ref else ""), flush=True)

    row("gpt-oss causal", base, None)
    row("gpt-oss causal + sink", _time(gpt.frost_fn(with_sink=True), iters))
    row("gpt-oss window 128 + sink", _time(gpt.frost_fn(with_sink=True, band_left=128), iters))
    try:
        row("gpt-oss causal, torch flash enable_gqa", _time(gpt.torch_fn(), iters))
    except RuntimeError as e:
        print(f"torch flash enable_gqa unavailable: {e}")
    gqa = GqaCase(2, 32, 8, 4096, 128, dtype)
    t_f = _time(gqa.frost_fn(), iters)
    try:
        t_t = _time(gqa.torch_fn(), iters)
        print(f"{'GQA 2,32,8,4096,128 causal frost':>44} | {t_f:8.3f} | torch flash {t_t:.3f} ms: "
              f"frost speedup {t_t / t_f:5.3f}x", flush=True)
    except RuntimeError as e:
        print(f"GQA frost {t_f:.3f} ms; torch flash enable_gqa unavailable: {e}")
    row("gpt-oss causal deterministic", _time(gpt.frost_fn(deterministic=True), iters))
    row("gpt-oss causal + sink deterministic", _time(gpt.frost_fn(with_sink=True, deterministic=True), iters))
    row("gpt-oss window 128 + sink deterministic",
        _time(gpt.frost_fn(with_sink=True, band_left=128, deterministic=True), iters))
    d128 = _time(gqa.frost_fn(deterministic=True), iters)
    print(f"{'GQA 2,32,8,4096,128 deterministic':>44} | {d128:8.3f} | {d128 / t_f:5.3f}x default", flush=True)


def bench_deterministic(dtype, iters, head_dims):
    """Deterministic mode's cost per head dim (README's numbers): deterministic / default time, MHA B2 H16 S4096
    causal, the two modes measured one after the other, twice."""
    print(f"{'D':>4} | {'default ms':>10} {'det ms':>8} | det / default")
    for d in head_dims:
        case = GqaCase(2, 16, 16, 4096, d, dtype)
        det, default = case.frost_fn(deterministic=True), case.frost_fn()
        for _ in range(2):
            t_d, t_f = _time(det, iters), _time(default, iters)
            print(f"{d:>4} | {t_f:10.3f} {t_d:8.3f} | {t_d / t_f:5.3f}x", flush=True)


def bench_windows(dtype, iters, head_dims, band):
    """A sliding window + sink per head dim (the narrow-band sets), GQA 2,32,8 and MHA 2,16,16 at S4096, against
    the causal run of the same shape, both modes of the window."""
    print(f"{'shape':>22} | {'causal ms':>9} | {f'window {band} + sink ms':>22} {'/ causal':>8} | deterministic")
    for d in head_dims:
        for hq, hkv in ((32, 8), (16, 16)):
            case = GqaCase(2, hq, hkv, 4096, d, dtype)
            causal = _time(case.frost_fn(), iters)
            win = [_time(case.frost_fn(with_sink=True, band_left=band, deterministic=det), iters)
                   for det in (False, True)]
            print(f"{f'{hq}/{hkv} d{d}':>22} | {causal:9.3f} | {win[0]:22.3f} {win[0] / causal:7.3f}x | "
                  f"{win[1]:.3f} ({win[1] / win[0]:.3f}x)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--variants", default="", help="comma-separated names from bench_variants.VARIANTS")
    ap.add_argument("--features", action="store_true",
                    help="the feature benchmarks only (GQA, sink, window, deterministic)")
    ap.add_argument("--narrow-v", action="store_true", help="192/128 head dims: narrow vs padded V tiles only")
    ap.add_argument("--head-dims", default="64,128", help="comma-separated head dims (Q/K = V) to time against FA2")
    ap.add_argument("--deterministic", default="", help="comma-separated head dims: deterministic / default only")
    ap.add_argument("--windows", default="", help="comma-separated head dims: window + sink / causal only")
    ap.add_argument("--band", type=int, default=128, help="--windows: the window (left band)")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    if args.deterministic:
        print(f"device: {torch.cuda.get_device_name()}  dtype: {args.dtype}  torch {torch.__version__}")
        return bench_deterministic(dtype, args.iters, [int(d) for d in args.deterministic.split(",")])
    if args.windows:
        print(f"device: {torch.cuda.get_device_name()}  dtype: {args.dtype}  torch {torch.__version__}")
        return bench_windows(dtype, args.iters, [int(d) for d in args.windows.split(",")], args.band)
    if args.narrow_v:
        print(f"device: {torch.cuda.get_device_name()}  dtype: {args.dtype}  torch {torch.__version__}")
        return bench_narrow_v(dtype, args.iters)
    if args.features:
        print(f"device: {torch.cuda.get_device_name()}  dtype: {args.dtype}  torch {torch.__version__}")
        return bench_features(dtype, args.iters)
    variants = {}
    if args.variants:
        from bench_variants import VARIANTS

        variants = {n: VARIANTS[n] for n in args.variants.split(",")}
    print(f"device: {torch.cuda.get_device_name()}  dtype: {args.dtype}  torch {torch.__version__}")
    print(f"{'B':>2} {'H':>3} {'S':>5} {'D':>4} {'causal':>6} {'config':>18} | {'FA2 TF/s':>9} {'frost TF/s':>10} | "
          f"{'FA2 ms':>7} {'frost ms':>8} | {'ratio':>6} | max|frost-FA2|")
    head_dims = {int(d) for d in args.head_dims.split(",")}
    for d in sorted(head_dims | {t.head_dim_pad for t in variants.values()}):
        for causal in (False, True):
            case = Case(4, 16, 4096, d, causal, dtype)
            t_t = case.time_torch(args.iters)
            # a variant runs at its own pad, and at an asked head dim it pads to the next multiple of 32 (what that
            # head dim ran on before the 48/80 tiles: d72 on a d96 variant, not d80 on a d128 one)
            runs = [("default", None)] + [(n, t) for n, t in variants.items() if t.head_dim_pad == d
                                          or (d in head_dims and t.head_dim_pad == -(-d // 32) * 32)]
            for name, tile in runs:
                fn = case.frost_fn(tile)
                t_f = _time(fn, args.iters)
                diff = case.max_diff(fn)
                tf_t, tf_f = case.flops / t_t / 1e9, case.flops / t_f / 1e9
                print(f"{4:>2} {16:>3} {4096:>5} {d:>4} {str(causal):>6} {name:>18} | {tf_t:9.1f} {tf_f:10.1f} | "
                      f"{t_t:7.3f} {t_f:8.3f} | {tf_f / tf_t:5.2f}x | {diff:.2e}", flush=True)


if __name__ == "__main__":
    main()
