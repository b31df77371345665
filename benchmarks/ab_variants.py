"""A/B timing of kernel-set candidates against the served sets, one process per variant, alternating (GPU machine).

    python3 benchmarks/ab_variants.py --variants d256_dqg_1p,d256_dqg_1p_lean2 --case d256-causal \
        --case 2,16,16,4096,256 --case d256-causal,det [--rounds 2] [--iters 20] [--json $OUT/ab.json]

Variants are ``served`` (the baseline, always run) and names of bench_variants.CANDIDATES: changes to the tile (and
the ptxas options) of the kernel set a case runs on; a candidate that does not change that set says so in the
note column. Cases: names of frost.bench.cases' suites or ``B,Hq,Hkv,S,D[,causal][,window=W][,sink]``, either
ending in ``,det`` for deterministic mode. Each process times every case (CUDA events after warm-up, median:
frost.bench.timing; inputs rotate past L2 as in ``frost bench``), prints one result line per case, and keeps a
sample of its gradients; the table gives each variant's mean over the rounds, the rounds' spread, the ratio to the
served set, whether its gradients are byte-equal to the served set's, and the largest sampled difference relative
to the served gradient's largest element (a sanity check: the GPU tests are the correctness gate)."""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tools.ab import (Row, format_table, gradient_sample, parse_case, parse_results, result_line,  # noqa: E402
                            sample_diff, sample_path, schedule, summarise)

BASELINE = "served"


class Declined(Exception):
    """The candidate does not change the kernel set this case runs on."""


def _prepare(c, det: bool, variant: str, dtype: str):
    """(run(i), input sets, gradients) for one case on the served set or on a candidate's change of it."""
    import torch

    from bench_variants import CANDIDATES
    from frost.bench.inputs import softmax_scale
    from frost.bench.runner import Options, make_sets
    from frost.kernels import choose_config, detect_arch, workspace_regions
    from frost.kernels.backward.api import CompiledBackward
    from frost.kernels.backward.compile import compile_kernels
    from frost.kernels.backward.launch import BackwardTensors, Problem
    from frost.kernels.backward.select import Sizes

    sets = make_sets(c, Options(dtype=dtype))
    scale, (left, _) = softmax_scale(c), c.band
    cfg = choose_config(dtype, c.head_dim, c.head_dim_v, c.causal, "top_left", detect_arch(), band_left=left,
                        deterministic=det, sizes=Sizes(c.batch, c.heads_q, c.heads_kv, c.seq_q, c.seq_kv))
    problem = Problem(c.batch, c.heads_q, c.heads_kv, c.seq_q, c.seq_kv, scale, cfg.mask(left), det,
                      frozenset({"sink", "dsink"} if c.sink else ()))
    kernels = None
    if variant != BASELINE:
        cand, key = CANDIDATES[variant], cfg.key
        why = cand.declines(key)
        if why:
            raise Declined(why)
        kernels = compile_kernels(key, tile=cand.tile(key), ptxas_options=cand.ptxas_for(key))
    bwd = CompiledBackward(cfg, kernels)
    ws = {n: torch.empty(max(b, 16), dtype=torch.uint8, device="cuda")
          for n, b in workspace_regions(cfg, c.batch, c.heads_q, c.seq_q, c.seq_kv, heads_kv=c.heads_kv)}
    s0 = sets[0]
    grads = (torch.empty_like(s0.q), torch.empty_like(s0.k), torch.empty_like(s0.v))   # BSHD, like the inputs
    dsink = torch.empty_like(s0.optional["sink"]) if c.sink else None

    def bhsd(s):
        return [t.transpose(1, 2) for t in (s.q, s.k, s.v, s.out, s.dout)] + [s.lse]

    # one checked call, then the bound launch (which must be this variant's kernels, not a twin set)
    bwd(*bhsd(s0), *(g.transpose(1, 2) for g in grads), scale=scale, workspace=ws, band_left=left,
        sink=s0.optional.get("sink"), dsink=dsink, deterministic=det)
    launch = bwd.bind(problem)
    if launch.backward is not bwd.kernels.backward:
        raise RuntimeError(f"case {c.name} ran on a twin kernel set, not {cfg.key.as_str()}")

    calls = [BackwardTensors(s.q, s.k, s.v, s.out, s.dout, s.lse, *grads, ws,
                             {"sink": s.optional["sink"], "dsink": dsink} if c.sink else {}) for s in sets]

    def run(i: int):
        launch(calls[i], None, seq_major=True)

    return run, sets, grads + ((dsink,) if c.sink else ())


def _digest(grads) -> str:
    """sha256 (16 hex digits) over the gradients' bytes."""
    import torch

    h = hashlib.sha256()
    for g in grads:
        h.update(g.detach().contiguous().view(-1).view(torch.uint8).cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def child(variant: str, rnd: int, cases: list, dtype: str, iters: int, samples: str) -> None:
    import torch

    from frost.bench.runner import short
    from frost.bench.timing import median_ms

    for text in cases:
        c, det, label = parse_case(text)
        try:
            run, sets, grads = _prepare(c, det, variant, dtype)
            t = median_ms(run, len(sets), warmup=3, iters=iters, max_seconds=20.0)
            run(0)
            torch.cuda.synchronize()
            torch.save(gradient_sample(grads), sample_path(samples, label, variant, rnd))
            row = Row(variant, rnd, label, t.ms, _digest(grads), f"{t.calls} calls, {len(sets)} set(s)")
        except Declined as exc:
            row = Row(variant, rnd, label, None, note=f"n/a: {exc}")
        except Exception as exc:  # noqa: BLE001 -- one case failing is a result, not the end of the run
            row = Row(variant, rnd, label, None, note=short(exc, 200))
        print(result_line(row), flush=True)
        torch.cuda.empty_cache()


def parent(args) -> int:
    from bench_variants import CANDIDATES

    variants = [BASELINE] + [v for v in args.variants.split(",") if v and v != BASELINE]
    unknown = [v for v in variants[1:] if v not in CANDIDATES]
    if unknown:
        sys.exit(f"unknown variants {unknown}; bench_variants.CANDIDATES has {sorted(CANDIDATES)}")
    labels = [parse_case(text)[2] for text in args.case]   # (fails here, before any process, on a bad case)
    samples = args.samples or tempfile.mkdtemp(prefix="frost-ab-")
    os.makedirs(samples, exist_ok=True)
    rows, start = [], time.monotonic()
    for rnd, v in schedule(variants, args.rounds):
        cmd = [sys.executable, os.path.abspath(__file__), "--child", v, "--round", str(rnd), "--dtype", args.dtype,
               "--iters", str(args.iters), "--samples", samples] + [a for text in args.case for a in ("--case", text)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            stdout, tail, rc = proc.stdout, proc.stderr.strip().splitlines(), proc.returncode
        except subprocess.TimeoutExpired as exc:
            stdout, tail, rc = exc.stdout or "", [f"timed out after {args.timeout} s"], "timeout"
            stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
        got = parse_results(stdout)
        seen = {r.case for r in got}
        failed = f"process rc={rc}: {tail[-1] if tail else 'no error output'}"
        got += [Row(v, rnd, label, None, note=failed) for label in labels if label not in seen]
        rows += got
        print(f"[{time.monotonic() - start:6.0f} s] round {rnd} {v}: "
              + ", ".join(f"{r.case} {r.ms:.3f} ms" if r.ms else f"{r.case} -" for r in got), flush=True)
    diffs = {(label, v): sample_diff(samples, label, v, BASELINE, args.rounds) for label in labels for v in variants}
    summaries = summarise(rows, BASELINE, diffs)
    print(format_table(summaries, BASELINE))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"dtype": args.dtype, "rounds": args.rounds, "rows": [r.__dict__ for r in rows],
                       "summary": [dict(s.__dict__, spread=s.spread) for s in summaries]}, fh, indent=1)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="", help="comma-separated bench_variants.CANDIDATES names")
    ap.add_argument("--case", action="append", required=True, help="a case (repeat for more; see the docstring)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    ap.add_argument("--json", default="", help="write every row and the summary here")
    ap.add_argument("--samples", default="", help="directory for the gradient samples (default: a temp dir)")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.round, args.case, args.dtype, args.iters, args.samples)
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
