"""Packed (varlen) attention side by side in one process: frost's packed kernels vs frost's dense kernels
on the same documents padded to a batch (B x max_len with per-batch lengths) vs FlashAttention-4's SM120 varlen
kernels (FLASH_ATTENTION_ARCH=sm_120 on the H200), forward and backward, and frost's dense throughput at the same
total tokens (B x S = the packed tokens rounded to S) for reference.

Two document mixes (fixed seeds), causal: "uniform", 8 lengths drawn uniformly from [256, 8192] (39,427 tokens), and
"one-long", one 12,288-token document among 23 drawn uniformly from [1, 2048]. Heads: d64 (Hq 64 / Hkv 8, the gpt-oss
shape) and d128 (Hq = Hkv = 16), with and without a sink. TFLOP/s count the (query, key) pairs the mask keeps in each
document (4 * H * D per pair forward, 2.5 times that backward: frost.bench.flops's convention). Times are the median
GPU time of one call (frost.bench.timing), SM120's occupancy emulated for frost; a step is the forward's time plus
the backward's. Memory is the peak the runner's tensors, workspace and one forward + backward take on the GPU.

    python3 benchmarks/bench_varlen.py [--iters 20] [--mixes uniform,one-long] [--peer-smem free|padded]
                                       [--json out.json] [--markdown out.md]"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
from dataclasses import asdict, dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

MIXES = ("uniform", "one-long")


@dataclass(frozen=True)
class Config:
    name: str
    hq: int
    hkv: int
    d: int
    sink: bool


CONFIGS = (Config("d64 gpt-oss", 64, 8, 64, False), Config("d64 gpt-oss +sink", 64, 8, 64, True),
           Config("d128", 16, 16, 128, False), Config("d128 +sink", 16, 16, 128, True))


@dataclass
class Row:
    config: str
    lengths: list
    mix: str = "uniform"
    ms: dict = field(default_factory=dict)        # (backend/pass) -> ms, or a reason string
    tflops: dict = field(default_factory=dict)
    peak_mib: dict = field(default_factory=dict)  # backend -> peak GPU memory of its tensors and one fwd + bwd


def lengths(mix: str = "uniform") -> list[int]:
    """The documents of a mix (see the top)."""
    if mix == "uniform":
        rng = random.Random(0)
        return [rng.randint(256, 8192) for _ in range(8)]
    if mix == "one-long":
        rng = random.Random(1)
        return [12288, *(rng.randint(1, 2048) for _ in range(23))]
    raise ValueError(f"mix {mix!r} not in {MIXES}")


def causal_pairs(n: int) -> int:
    return n * (n + 1) // 2


def _time(run, iters: int) -> float:
    from frost.bench.timing import median_ms

    return median_ms(lambda i: run(), 1, warmup=3, iters=iters, max_seconds=5.0).ms


def packed_inputs(cfg: Config, lens: list[int]):
    import torch

    g = torch.Generator(device="cuda").manual_seed(1)
    t = sum(lens)

    def rnd(*shape):
        return torch.randn(shape, generator=g, device="cuda").to(torch.bfloat16)

    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    sink = torch.randn(cfg.hq, generator=g, device="cuda") if cfg.sink else None
    return dict(q=rnd(t, cfg.hq, cfg.d), k=rnd(t, cfg.hkv, cfg.d), v=rnd(t, cfg.hkv, cfg.d),
                do=rnd(t, cfg.hq, cfg.d), cu=cu, max_len=max(lens), sink=sink)


def frost_packed(cfg: Config, inp) -> dict:
    """{"fwd": run, "bwd": run} on frost's packed kernel sets (logical (H, T, D) views of the THD tensors)."""
    import torch

    from frost.kernels import choose_config, compile_backward, detect_arch, workspace_regions
    from frost.kernels.forward import choose_forward_config, compile_forward
    from frost.kernels.forward.launch import ForwardTensors
    from frost.spec import Mask
    from frost.kernels.packed import Packed

    arch, scale = detect_arch(), 1 / math.sqrt(cfg.d)
    packed = Packed(inp["cu"], inp["cu"], inp["max_len"], inp["max_len"])
    q, k, v, do = (inp[n].transpose(0, 1) for n in ("q", "k", "v", "do"))
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], device="cuda")
    fwd = compile_forward(choose_forward_config("bfloat16", cfg.d, cfg.d, arch, varlen=True))
    bound = fwd.bind(scale, Mask.of(True))
    call = ForwardTensors(q, k, v, o, lse, {"sink": inp["sink"]} if inp["sink"] is not None else {}, packed)
    bound(call)
    bcfg = choose_config("bfloat16", cfg.d, cfg.d, True, "top_left", arch, gqa_group=cfg.hq // cfg.hkv, varlen=True)
    bwd = compile_backward(bcfg)
    ws = {n: torch.empty(max(x, 16), dtype=torch.uint8, device="cuda")
          for n, x in workspace_regions(bcfg, packed.batch, cfg.hq, inp["max_len"], inp["max_len"],
                                        tokens_q=q.shape[1])}
    grads = [torch.zeros_like(t) for t in (q, k, v)]
    dsink = None if inp["sink"] is None else torch.empty_like(inp["sink"])
    return {"fwd": lambda: bound(call),
            "bwd": lambda: bwd(q, k, v, o, do, lse, *grads, scale=scale, workspace=ws, sink=inp["sink"],
                               dsink=dsink, packed=packed)}


def frost_dense(cfg: Config, b: int, s: int, lens: list[int] | None, sink) -> dict:
    """{"fwd", "bwd"} on frost's dense kernels: a (B, S) batch, with per-batch lengths ``lens`` (padding)."""
    import torch

    from frost.kernels import choose_config, compile_backward, detect_arch, workspace_regions
    from frost.kernels.forward import choose_forward_config, compile_forward
    from frost.kernels.forward.launch import ForwardTensors
    from frost.spec import Mask

    arch, scale = detect_arch(), 1 / math.sqrt(cfg.d)
    g = torch.Generator(device="cuda").manual_seed(2)

    def rnd(h):
        return torch.randn((b, s, h, cfg.d), generator=g, device="cuda").to(torch.bfloat16).transpose(1, 2)

    q, k, v, do = rnd(cfg.hq), rnd(cfg.hkv), rnd(cfg.hkv), rnd(cfg.hq)
    o, lse = torch.empty_like(q), torch.empty((b, cfg.hq, s), device="cuda")
    seq = None if lens is None else torch.tensor(lens, dtype=torch.int32, device="cuda")
    fwd = compile_forward(choose_forward_config("bfloat16", cfg.d, cfg.d, arch))
    bound = fwd.bind(scale, Mask.of(True))
    call = ForwardTensors(q, k, v, o, lse, {r: x for r, x in (("seq_len_q", seq), ("seq_len_kv", seq), ("sink", sink))
                                             if x is not None})
    bound(call)
    bcfg = choose_config("bfloat16", cfg.d, cfg.d, True, "top_left", arch, gqa_group=cfg.hq // cfg.hkv)
    bwd = compile_backward(bcfg)
    ws = {n: torch.empty(max(x, 16), dtype=torch.uint8, device="cuda")
          for n, x in workspace_regions(bcfg, b, cfg.hq, s, s)}
    grads = [torch.empty_like(t) for t in (q, k, v)]
    dsink = None if sink is None else torch.empty_like(sink)
    return {"fwd": lambda: bound(call),
            "bwd": lambda: bwd(q, k, v, o, do, lse, *grads, scale=scale, workspace=ws, seq_len_q=seq, seq_len_kv=seq,
                               sink=sink, dsink=dsink)}


def fa4_packed(cfg: Config, inp) -> dict | str:
    """{"fwd", "bwd"} on FA4's SM120 varlen forward and backward, or why not."""
    if cfg.sink:
        return "declined: FA4's SM120 kernels have no learnable sink"
    import torch

    os.environ.setdefault("FLASH_ATTENTION_ARCH", "sm_120")
    os.environ.setdefault("FLASH_ATTENTION_NUM_SMS", str(torch.cuda.get_device_properties(0).multi_processor_count))
    from flash_attn.cute.interface import _flash_attn_bwd, _flash_attn_fwd

    scale, m, cu = 1 / math.sqrt(cfg.d), inp["max_len"], inp["cu"]
    seg = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=m, max_seqlen_k=m)
    out, lse = _flash_attn_fwd(inp["q"], inp["k"], inp["v"], softmax_scale=scale, causal=True, return_lse=True,
                               **seg)[:2]
    return {"fwd": lambda: _flash_attn_fwd(inp["q"], inp["k"], inp["v"], softmax_scale=scale, causal=True, **seg),
            "bwd": lambda: _flash_attn_bwd(inp["q"], inp["k"], inp["v"], out, inp["do"], lse, softmax_scale=scale,
                                           causal=True, **seg)}


def run_config(cfg: Config, mix: str, iters: int, peer_smem: str = "free") -> Row:
    """One row; with ``peer_smem`` "padded", FA4's kernels compile and run with their launches padded to SM120's
    occupancy as frost's are (frost.bench.sm120_launches)."""
    import torch

    lens = lengths(mix)
    docs = len(lens)
    row = Row(cfg.name, lens, mix)
    pairs = sum(causal_pairs(n) for n in lens)
    flops = {"fwd": 4.0 * cfg.hq * cfg.d * pairs, "bwd": 10.0 * cfg.hq * cfg.d * pairs}
    inp = packed_inputs(cfg, lens)
    s_dense = -(-sum(lens) // docs // 128) * 128
    runners = {"frost_packed": lambda: frost_packed(cfg, inp),
               "frost_padded": lambda: frost_dense(cfg, docs, max(lens), lens, inp["sink"]),
               "frost_dense_same_tokens": lambda: frost_dense(cfg, docs, s_dense, None, inp["sink"]),
               "fa4_packed": lambda: fa4_packed(cfg, inp)}
    for name, make in runners.items():
        with _launches(name, peer_smem):
            _measure(row, name, make, iters, flops, pairs, docs, s_dense)
        torch.cuda.empty_cache()
    return row


def _launches(name: str, peer_smem: str):
    """What a runner's calls run inside: a peer's launches padded when asked for, else nothing."""
    from frost.bench.sm120_launches import padded_when

    return padded_when(peer_smem == "padded" and not name.startswith("frost"))


def _measure(row: Row, name: str, make, iters: int, flops: dict, pairs: int, docs: int, s_dense: int) -> None:
    """One runner's peak memory, times and TFLOP/s into ``row`` (or why it could not run)."""
    import torch

    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    try:
        runs = make()
    except Exception as e:   # a peer that cannot run here is reported, not fatal
        row.ms[name] = f"error {type(e).__name__}: {str(e)[:160]}"
        return
    if isinstance(runs, str):
        row.ms[name] = runs
        return
    for run in runs.values():
        run()
    torch.cuda.synchronize()
    row.peak_mib[name] = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    # dense at the same tokens computes its own pairs (B x S causal), not the documents'
    scale = docs * causal_pairs(s_dense) / pairs if name == "frost_dense_same_tokens" else 1
    for which, run in runs.items():
        ms = _time(run, iters)
        row.ms[f"{name}/{which}"] = ms
        row.tflops[f"{name}/{which}"] = flops[which] * scale / ms / 1e9
    _add_step(row, name, flops, scale)


def _add_step(row: Row, name: str, flops: dict, scale: float) -> None:
    """A training step's attention: the forward's time plus the backward's."""
    fwd, bwd = row.ms.get(f"{name}/fwd"), row.ms.get(f"{name}/bwd")
    if isinstance(fwd, float) and isinstance(bwd, float):
        row.ms[f"{name}/step"] = fwd + bwd
        row.tflops[f"{name}/step"] = (flops["fwd"] + flops["bwd"]) * scale / (fwd + bwd) / 1e9


PASSES = ("fwd", "bwd", "step")


def ratios(row: Row, which: str) -> dict:
    """The measures of one pass (None where a side did not run): packed TFLOP/s over dense TFLOP/s at the same
    tokens, the padded batch's time over packed, FA4's time over packed (target >= 1.1); and why FA4 did not run,
    if it did not."""
    ms, tf, p = row.ms, row.tflops, f"frost_packed/{which}"

    def over(a: dict, x: str, y: str):
        return a[x] / a[y] if isinstance(a.get(x), float) and isinstance(a.get(y), float) else None

    fa4 = ms.get(f"fa4_packed/{which}", ms.get("fa4_packed"))
    return {"ms": ms.get(p), "tflops": tf.get(p), "vs_dense": over(tf, p, f"frost_dense_same_tokens/{which}"),
            "padded_over_packed": over(ms, f"frost_padded/{which}", p),
            "fa4_over_packed": over(ms, f"fa4_packed/{which}", p), "fa4_note": fa4 if isinstance(fa4, str) else None}


def _cell(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def summary(row: Row) -> str:
    mem = ", ".join(f"{n} {m:.0f} MiB" for n, m in row.peak_mib.items())
    lines = [f"{row.mix} / {row.config}: {len(row.lengths)} docs, {sum(row.lengths)} tokens, max {max(row.lengths)}; "
             f"peak memory {mem}"]
    for which in PASSES:
        r = ratios(row, which)
        fa4 = r["fa4_note"] or _cell(r["fa4_over_packed"], ".2f")
        lines.append(f"  {which}: packed {_cell(r['ms'], '.3f')} ms {_cell(r['tflops'], '.0f')} TF/s; "
                     f"/dense-same-tokens TF {_cell(r['vs_dense'], '.2f')}; "
                     f"padded/packed time {_cell(r['padded_over_packed'], '.2f')}; fa4/packed time {fa4}")
    return "\n".join(lines)


def markdown(rows: list[Row]) -> str:
    """The docs/bench table: one line per (config, pass)."""
    head = ("| mix | config | pass | packed ms | packed TFLOP/s | FA4 varlen time ÷ packed (≥ 1.1) | "
            "÷ dense TFLOP/s, same tokens | padded time ÷ packed | peak MiB packed / padded |\n"
            "|---|---|---|---|---|---|---|---|---|")
    names = {"fwd": "forward", "bwd": "backward", "step": "step"}
    lines = [head]
    for row in rows:
        mem = "/".join(_cell(row.peak_mib.get(n), ".0f") for n in ("frost_packed", "frost_padded"))
        for which in PASSES:
            r = ratios(row, which)
            fa4 = "-" if r["fa4_note"] else _cell(r["fa4_over_packed"], ".2f")
            lines.append(f"| {row.mix} | {row.config} | {names[which]} | {_cell(r['ms'], '.3f')} | "
                         f"{_cell(r['tflops'], '.1f')} | {fa4} | {_cell(r['vs_dense'], '.2f')} | "
                         f"{_cell(r['padded_over_packed'], '.2f')} | {mem if which == 'fwd' else ''} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--json", default=None)
    p.add_argument("--markdown", default=None, help="also write the table as markdown (docs/bench)")
    p.add_argument("--configs", default="all", help="comma-separated config names, or all")
    p.add_argument("--mixes", default=",".join(MIXES), help=f"comma-separated document mixes of {MIXES}")
    p.add_argument("--peer-smem", choices=("free", "padded"), default="free",
                   help="padded: FA4's launches padded to SM120's occupancy as frost's are (see frost bench)")
    args = p.parse_args(argv)
    chosen = [c for c in CONFIGS if args.configs == "all" or c.name in args.configs.split(",")]
    rows = []
    for mix in args.mixes.split(","):
        for cfg in chosen:
            row = run_config(cfg, mix, args.iters, args.peer_smem)
            rows.append(row)
            print(summary(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows) + "\n")


if __name__ == "__main__":
    main()
