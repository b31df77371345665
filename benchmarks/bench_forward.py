"""Forward attention side by side in one process: frost's CuTe-DSL forward (frost.kernels.forward), torch's flash
SDPA forward and FlashAttention-4's SM120 forward (flash_attn.cute, FLASH_ATTENTION_ARCH=sm_120 on the H200: the
same-class peer), on MHA d64/d128, GQA d128 and gpt-oss shapes. TFLOP/s = 4 * B * Hq * pairs * D
(frost.bench.flops: pairs are the (query, key) pairs the mask keeps). Peers that cannot run a shape (a sink) are
listed as declined. Times are the median GPU time of one forward (frost.bench.timing), with SM120's occupancy
emulated for frost (arch.py).

    python3 benchmarks/bench_forward.py [--iters 30] [--shapes all|quick] [--variants [--rounds 2]]

``--variants`` times frost's tile alternatives (VARIANTS) on the d64 / d128 shapes instead of the peers."""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


@dataclass(frozen=True)
class Shape:
    name: str
    b: int
    hq: int
    hkv: int
    s: int
    d: int
    causal: bool = False
    window: int | None = None   # sliding-window left bound (with causal)
    sink: bool = False


SHAPES = (
    Shape("mha d128", 4, 16, 16, 4096, 128), Shape("mha d128 causal", 4, 16, 16, 4096, 128, True),
    Shape("mha d64", 4, 16, 16, 4096, 64), Shape("mha d64 causal", 4, 16, 16, 4096, 64, True),
    Shape("gqa d128 causal", 2, 32, 8, 4096, 128, True),
    Shape("gpt-oss causal+sink", 2, 64, 8, 4096, 64, True, sink=True),
    Shape("gpt-oss window128+sink", 2, 64, 8, 4096, 64, True, window=128, sink=True),
)


# (m_block, n_block, warps, min_blocks, kv_stages[, q_in_regs[, lazy_rescale]]) alternatives per head dim; the
# first is the table's
VARIANTS = {64: ((128, 64, 4, 2, 2, True), (128, 64, 4, 2, 2), (128, 64, 4, 2, 2, True, True), (64, 64, 4, 2, 2),
                 (64, 64, 4, 2, 2, True), (64, 32, 4, 2, 2), (128, 128, 8, 1, 2, True), (64, 128, 4, 2, 1, True)),
            128: ((128, 32, 4, 2, 1), (128, 64, 4, 1, 1), (128, 64, 4, 1, 2), (128, 64, 8, 1, 2),
                  (128, 32, 4, 2, 1, False, True), (128, 64, 8, 1, 2, True), (128, 64, 8, 1, 2, True, True),
                  (256, 32, 8, 1, 1), (128, 128, 8, 1, 1))}


def _flops(sh: Shape) -> float:
    from frost.bench.flops import band_pairs

    right = 0 if sh.causal else None
    return 4.0 * sh.b * sh.hq * sh.d * band_pairs(sh.s, sh.s, sh.window, right)


def _inputs(sh: Shape):
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn((sh.b, sh.s, sh.hq, sh.d), generator=g, device="cuda", dtype=torch.bfloat16)
    k = torch.randn((sh.b, sh.s, sh.hkv, sh.d), generator=g, device="cuda", dtype=torch.bfloat16)
    v = torch.randn((sh.b, sh.s, sh.hkv, sh.d), generator=g, device="cuda", dtype=torch.bfloat16)
    sink = torch.randn(sh.hq, generator=g, device="cuda") if sh.sink else None
    return q, k, v, sink


_TILE_KERNELS: dict = {}


def frost_runner(sh: Shape, q, k, v, sink, tile=None):
    import torch

    from frost.kernels.arch import detect_arch
    from frost.kernels.forward import choose_forward_config, compile_forward
    from frost.kernels.forward.api import CompiledForward
    from frost.kernels.forward.compile import compile_forward_kernel
    from frost.kernels.forward.tiles import ForwardTile

    cfg = choose_forward_config("bfloat16", sh.d, sh.d, detect_arch())
    if tile is None:
        fwd = compile_forward(cfg)
    else:
        if (cfg.key, tile) not in _TILE_KERNELS:  # one compile per tile, whatever the shape
            _TILE_KERNELS[cfg.key, tile] = compile_forward_kernel(cfg.key, tile=ForwardTile(sh.d, sh.d, *tile))
        fwd = CompiledForward(cfg, _TILE_KERNELS[cfg.key, tile])
    o = torch.empty_like(q).transpose(1, 2)
    lse = torch.empty((sh.b, sh.hq, sh.s), device="cuda")
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    scale = 1 / math.sqrt(sh.d)
    return lambda: fwd(qt, kt, vt, o, lse, scale=scale, causal=sh.causal, band_left=sh.window, sink=sink)


def torch_runner(sh: Shape, q, k, v, sink):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if sink is not None or sh.window is not None:
        return "declined: no sink / window in torch SDPA flash"
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    gqa = sh.hq != sh.hkv

    def run():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=sh.causal, enable_gqa=gqa)
    return run


def fa4_runner(sh: Shape, q, k, v, sink):
    import torch

    if sink is not None:
        return "declined: FA4's SM120 forward has no learnable sink"
    os.environ.setdefault("FLASH_ATTENTION_ARCH", "sm_120")
    os.environ.setdefault("FLASH_ATTENTION_NUM_SMS", str(torch.cuda.get_device_properties(0).multi_processor_count))
    from flash_attn.cute import flash_attn_func

    window = (sh.window, 0) if sh.window is not None else (None, None)
    return lambda: flash_attn_func(q, k, v, softmax_scale=1 / math.sqrt(sh.d), causal=sh.causal, window_size=window)


def _time(run, iters: int) -> float:
    from frost.bench.timing import median_ms

    return median_ms(lambda i: run(), 1, warmup=3, iters=iters, max_seconds=5.0).ms


def variants(iters: int, rounds: int, dims: tuple[int, ...], only: tuple[tuple, ...] = ()) -> None:
    """frost's tile alternatives side by side on the d64 / d128 shapes (those of ``dims``; of the tiles only those in
    ``only`` when it is given), ``rounds`` times over (the spread between rounds is the noise). Every tile is compiled
    before any is timed, so the timings run back to back."""
    chosen = {d: tuple(t for t in tiles if not only or t in only) for d, tiles in VARIANTS.items() if d in dims}
    runs = {}
    for d, tiles in chosen.items():
        for sh in (sh for sh in SHAPES if sh.d == d):
            q, k, v, sink = _inputs(sh)
            for tile in tiles:
                try:
                    runs[d, tile, sh.name] = frost_runner(sh, q, k, v, sink, tile)
                except Exception as e:
                    runs[d, tile, sh.name] = f"error {type(e).__name__}: {str(e)[:60]}"
    for d, tiles in [(d, tiles) for _ in range(rounds) for d, tiles in chosen.items()]:
        shapes = [sh for sh in SHAPES if sh.d == d]
        print(f"d{d} (m, n, warps, min_blocks, stages, q_in_regs, lazy_rescale): "
              + "  ".join(sh.name for sh in shapes))
        for tile in tiles:
            cells = []
            for sh in shapes:
                run = runs[d, tile, sh.name]
                if isinstance(run, str):
                    cells.append(run)
                    continue
                ms = _time(run, iters)
                cells.append(f"{ms:>8.3f} ms {_flops(sh) / ms / 1e9:>6.1f} TF")
            print(f"  {str(tile):<36}" + "".join(cells), flush=True)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--shapes", choices=("all", "quick"), default="all")
    p.add_argument("--variants", action="store_true")
    p.add_argument("--rounds", type=int, default=2, help="--variants: times each tile this many times over")
    p.add_argument("--dims", default="64,128", help="--variants: the head dims whose tiles are timed")
    p.add_argument("--tiles", default="",
                   help='--variants: only these VARIANTS tiles, e.g. "128,32,4,2,1;128,64,4,1,1"')
    args = p.parse_args(argv)
    if args.variants:
        only = tuple(tuple(int(x) if x.isdigit() else x == "True" for x in t.split(",")) for t in args.tiles.split(";")
                     if t)
        variants(args.iters, args.rounds, tuple(int(d) for d in args.dims.split(",")), only)
        return
    shapes = SHAPES if args.shapes == "all" else SHAPES[:4]
    runners = (("frost", frost_runner), ("torch_flash", torch_runner), ("fa4_sm120", fa4_runner))
    print(f"{'shape':<26}" + "".join(f"{n:>22}" for n, _ in runners) + f"{'frost/fa4':>11}")
    for sh in shapes:
        q, k, v, sink = _inputs(sh)
        cells, ms = [], {}
        for name, make in runners:
            try:
                run = make(sh, q, k, v, sink)
                if isinstance(run, str):
                    cells.append(f"{'declined':>22}")
                    continue
                ms[name] = _time(run, args.iters)
                cells.append(f"{ms[name]:>9.3f} ms {_flops(sh) / ms[name] / 1e9:>6.1f} TF")
            except Exception as e:  # a peer that fails on this machine is reported, not fatal
                cells.append(f"{'error ' + type(e).__name__:>22}")
                print(f"  {name} on {sh.name}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
        ratio = f"{ms['fa4_sm120'] / ms['frost']:>10.2f}x" if {"frost", "fa4_sm120"} <= ms.keys() else f"{'-':>11}"
        print(f"{sh.name:<26}" + "".join(cells) + ratio, flush=True)


if __name__ == "__main__":
    main()
