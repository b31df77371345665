"""Ordered vs atomic dQ on bands: the measurements behind frost.kernels.backward.catalogue.ORDERED_BAND.

    python3 benchmarks/bench_ordered_dq.py [--head-dims 32,48,64,80,96,128,160,256] [--widths 64,128,256]
    python3 benchmarks/bench_ordered_dq.py --gqa-shapes        # gpt-oss and GQA d128 shapes, L up to 2048

Per head dim, the same backward (bf16, sink, causal with a left band L) twice in one process: with dQ added
atomically (catalogue.ORDERED_BAND emptied, the default mode's path for wide bands) and in KV-tile order (every width
ordered, the path of deterministic mode and of narrow bands). Prints ordered / atomic time: below 1, ordering pays.
Default shape MHA B2 H16 S4096 (the least slack between a query tile's visitors). Times: CUDA events, median
(frost.bench.timing)."""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_kernels import GqaCase, _time  # noqa: E402

import frost.kernels.backward.catalogue as launch  # noqa: E402  (its ORDERED_BAND)
from frost.kernels.backward.catalogue import HEAD_DIM_PADS  # noqa: E402

ALWAYS = 1 << 30


def ordered_over_atomic(case: GqaCase, left: int, right: int, iters: int) -> tuple[float, float]:
    """(atomic ms, ordered ms) of one band on ``case``; each frost_fn binds a new launch, which reads the table."""
    saved = dict(launch.ORDERED_BAND)
    try:
        launch.ORDERED_BAND.clear()
        t_atomic = _time(case.frost_fn(with_sink=True, band_left=left, band_right=right), iters)
        launch.ORDERED_BAND.update({d: ALWAYS for d in HEAD_DIM_PADS})
        t_ordered = _time(case.frost_fn(with_sink=True, band_left=left, band_right=right), iters)
    finally:
        launch.ORDERED_BAND.clear()
        launch.ORDERED_BAND.update(saved)
    return t_atomic, t_ordered


def per_head_dim(head_dims, widths, iters):
    for d in head_dims:
        case = GqaCase(2, 16, 16, 4096, d, torch.bfloat16)
        cells = []
        for left in widths:
            t_a, t_o = ordered_over_atomic(case, left, 0, iters)
            cells.append(f"L{left} {t_a:.4f}/{t_o:.4f} ms = {t_o / t_a:.3f}")
        print(f"d{d}: " + "  ".join(cells), flush=True)


def gqa_shapes(iters):
    bands = ((0, 0), (64, 0), (128, 0), (256, 0), (512, 0), (1024, 0), (2048, 0), (128, 128), (256, 256))
    for b, hq, hkv, s, d in ((2, 64, 8, 4096, 64), (2, 32, 8, 4096, 128), (1, 32, 8, 16384, 128)):
        case = GqaCase(b, hq, hkv, s, d, torch.bfloat16)
        print(f"B{b} Hq{hq} Hkv{hkv} S{s} D{d}", flush=True)
        for left, right in bands:
            t_a, t_o = ordered_over_atomic(case, left, right, iters)
            print(f"  L{left:5d} R{right:4d}  atomic {t_a:.4f} ms  ordered {t_o:.4f} ms  ordered/atomic "
                  f"{t_o / t_a:.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dims", default="32,48,64,80,96,128,160,256")
    ap.add_argument("--widths", default="64,128,256")
    ap.add_argument("--gqa-shapes", action="store_true", help="gpt-oss and GQA d128 shapes, L up to 2048")
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}  served ORDERED_BAND: {launch.ORDERED_BAND}")
    if a.gqa_shapes:
        gqa_shapes(a.iters)
    else:
        per_head_dim([int(x) for x in a.head_dims.split(",")], [int(x) for x in a.widths.split(",")], a.iters)


if __name__ == "__main__":
    main()
