"""Run frost's backward (or, with --forward, its forward) twice on one shape so Nsight Compute can profile the
second launch of a kernel (the forward's is FwdKernel).

    ncu --clock-control none --kernel-name regex:BwdMain --launch-skip 1 --launch-count 1 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats \\
        python3 benchmarks/ncu_kernels.py --batch 4 --heads 16 --seq 4096 --head-dim 128 [--causal] [--window L]
        [--deterministic] [--variant NAME] [--forward] [--sink] [--fa4 [--padded]]

The first call compiles and warms up; the profiled one is the second. Not a benchmark (ncu replays the kernel).
With --fa4, FA4's SM120 forward (--forward) or backward runs instead: its kernels' names contain
FlashAttentionForward / FlashAttentionBackwardSm (the main kernel; its pre- and postprocess are named apart), and
its backward takes frost's out and lse for the same inputs."""

from __future__ import annotations

import argparse

import torch

import frost


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--heads-kv", type=int, default=None)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--window", type=int, default=None, help="sliding window: keys at most L before the query")
    ap.add_argument("--deterministic", action="store_true", help="deterministic mode (ordered dQ)")
    ap.add_argument("--forward", action="store_true", help="profile the forward instead of the backward")
    ap.add_argument("--sink", action="store_true", help="with learnable sink logits (one per query head)")
    ap.add_argument("--fa4", action="store_true",
                    help="run FA4's SM120 kernels (flash_attn.cute, FLASH_ATTENTION_ARCH=sm_120) instead of frost's")
    ap.add_argument("--padded", action="store_true",
                    help="--fa4: its launches padded to SM120's occupancy as frost's are (frost bench --peer-smem "
                         "padded)")
    ap.add_argument("--variant", default=None, help="a tile config of bench_variants.VARIANTS (direct kernel call)")
    a = ap.parse_args()
    if a.variant:
        from bench_kernels import Case
        from bench_variants import VARIANTS

        fn = Case(a.batch, a.heads, a.seq, a.head_dim, a.causal, torch.bfloat16).frost_fn(VARIANTS[a.variant])
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        return
    hkv = a.heads_kv or a.heads
    g = torch.Generator(device="cuda").manual_seed(0)

    def rand(h: int) -> torch.Tensor:
        return torch.randn(a.batch, a.seq, h, a.head_dim, device="cuda", dtype=torch.bfloat16, generator=g)

    q, k, v, dout = rand(a.heads), rand(hkv), rand(hkv), rand(a.heads)
    window = (a.window, None)
    sink = torch.randn(a.heads, device="cuda", generator=g) if a.sink else None
    out, lse = frost.attention(q, k, v, causal=a.causal, window_size=window, sink=sink, return_lse=True)
    if a.fa4:
        _fa4(a, q, k, v, out, dout, lse)
        return
    for _ in range(2):
        if a.forward:
            frost.sdpa_forward(q, k, v, causal=a.causal, window_size=window, sink=sink)
        else:
            frost.sdpa_backward(q, k, v, out, dout, lse, causal=a.causal, window_size=window, sink=sink,
                                deterministic=a.deterministic)
    torch.cuda.synchronize()
    print("engine:", frost.compile(frost.sdpa_backward_graph(a.batch, a.heads, a.seq, a.head_dim, heads_kv=hkv,
                                                              causal=a.causal)).engine)


def _fa4(a: argparse.Namespace, q, k, v, out, dout, lse) -> None:
    """FA4's forward or backward, twice (with FA4's arch and SM-count environment, as the bench sets them)."""
    from frost.bench.backends.fa4 import load_fa4_backward, load_fa4_function
    from frost.bench.sm120_launches import padded_when

    window = (a.window, None)
    flash_attn_func, flash_attn_bwd = load_fa4_function(q.device), load_fa4_backward(q.device)
    with padded_when(a.padded):
        for _ in range(2):
            if a.forward:
                flash_attn_func(q, k, v, causal=a.causal, window_size=window)
            else:
                flash_attn_bwd(q, k, v, out, dout, lse, causal=a.causal, window_size_left=a.window,
                               window_size_right=None)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
