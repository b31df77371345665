"""`frost bench`: frost's attention backward (or, with --pass, its forward, a whole training step, or several of
these) against its peers (torch SDPA flash/cudnn/efficient, FA4's SM120 kernels), in one process on the same
tensors, GPU time and host time per call; prints a table and writes JSON + PNG per pass under --out. `--ceiling`
adds the mma.sync throughput microbenchmark; `--render FILE.json` redraws the table and chart of a saved run (no
GPU)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from frost.bench.flops import PASSES
from frost.bench.report import Report
from frost.bench.runner import PEER_SMEM
from frost.commands.arg_types import int_at_least, seconds
from frost.errors import FrostError


class BenchArgumentError(FrostError, ValueError):
    """A --cases word that no case of the suite has, or a --backends name that names no backend."""


def register(sub) -> None:
    from frost.bench.cases import SUITE_WORDS, SUITES

    p = sub.add_parser("bench", help="benchmark attention (backward, forward or a training step) against its "
                       "peers (GPU)")
    p.add_argument("--suite", choices=tuple(SUITES), default="standard",
                   help="; ".join(f"{name}: {words}" for name, words in SUITE_WORDS.items()))
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--pass", dest="passes", type=passes_of, default=("backward",), metavar="PASS[,PASS...]",
                   help="what is timed: the backward (default), the forward, or a training step (forward + backward); "
                        "several, comma-separated, or all: one file each, in the order given")
    p.add_argument("--out", default="docs/bench", help="folder for the JSON, text table and PNG (created)")
    p.add_argument("--cases", help="only cases whose name contains one of these comma-separated words")
    p.add_argument("--backends", help="comma-separated subset: frost,torch-flash,torch-cudnn,torch-efficient,fa4")
    p.add_argument("--ceiling", action="store_true", help="also measure the mma.sync m16n8k16 ceiling")
    p.add_argument("--iters", type=int_at_least(1), default=20, help="timed calls per row (fewer when a call is slow)")
    p.add_argument("--warmup", type=int_at_least(0), default=3)
    p.add_argument("--budget-s", type=seconds, default=0.0,
                   help="stop starting new rows after this many seconds (they are reported as skipped)")
    p.add_argument("--peer-smem", choices=PEER_SMEM, default="free",
                   help="on a GPU with more shared memory per SM than SM120 (the H100's and H200's 228 KB): "
                        "padded: FA4's kernels request shared memory as frost's do, so no more of their CTAs share "
                        "an SM than on SM120 (torch's kernels are left as they are); sm120: every SM held to 100 KB "
                        "while a peer is timed (not working yet: see frost/bench/sm120_hold.py); free: the peers "
                        "as the GPU has them")
    p.add_argument("--render", metavar="JSON", help="only re-render the table and chart of a saved run")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: a smoke run of the harness (wall clock, frost's reference engine), not a benchmark")
    p.set_defaults(func=run)


def passes_of(text: str) -> tuple[str, ...]:
    """--pass's value: "all" or comma-separated names from flops.PASSES (argparse reports a bad one)."""
    names = PASSES if text == "all" else tuple(w for w in text.split(",") if w)
    bad = [w for w in names if w not in PASSES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: give all or comma-separated passes from {', '.join(PASSES)}")
    return tuple(dict.fromkeys(names))


def run(args) -> int:
    if args.render:
        with open(args.render, encoding="utf-8") as fh:
            report = Report.from_dict(json.load(fh))
        return _finish(report, os.path.splitext(args.render)[0])
    check_selection(args.suite, args.cases, args.backends)
    return _measure(args)


def check_selection(suite: str, cases_words: str | None, backend_names: str | None) -> None:
    """--cases and --backends against the suite's cases and the known backends, on any machine and before anything
    runs: a misspelt word would otherwise time nothing, or a subset the caller did not ask for."""
    from frost.bench import backends, cases

    names = [c.name for c in cases.SUITES[suite]]
    for word in (cases_words or "").split(","):
        if word and not any(word in name for name in names):
            raise BenchArgumentError(f"--cases: got {word!r}; accepted: comma-separated words found in the names "
                                     f"of the {suite} suite's cases ({', '.join(names) or 'none'})")
    known = [b.name for b in backends.all_backends()]
    for name in (backend_names or "").split(","):
        if name and name not in known:
            raise BenchArgumentError(f"--backends: got {name!r}; accepted: comma-separated names from "
                                     f"{', '.join(known)}")


def _measure(args) -> int:
    import time

    import torch

    from frost.bench import ceiling, runner

    if args.device == "cuda" and not torch.cuda.is_available():
        print("frost bench: needs a CUDA GPU (use --render FILE.json to redraw a saved run)", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    start = time.monotonic()
    reports = {}
    for which in args.passes:
        left = max(args.budget_s - (time.monotonic() - start), 1e-3) if args.budget_s > 0 else 0.0
        reports[which] = _measure_pass(args, which, left)
    if args.ceiling:   # last: a failure here cannot poison the CUDA context the rows above were measured in
        print("measuring the mma.sync ceiling ...", flush=True)
        measured = ceiling.measure()
        for report in reports.values():
            report.ceiling = measured
    for which, report in reports.items():
        runner.write_json(report, _stem(args, which) + ".json")
        _finish(report, _stem(args, which))
    return 0


def _stem(args: argparse.Namespace, which: str) -> str:
    """The run's files for one pass: bench_<suite>_<dtype>[_<pass>] (the backward has no suffix)."""
    suffix = "" if which == "backward" else f"_{which}"
    return os.path.join(args.out, f"bench_{args.suite}_{args.dtype}{suffix}")


def _measure_pass(args: argparse.Namespace, which: str, budget_s: float) -> Report:
    """One pass over the suite, its JSON rewritten after every case; returns its Report."""
    from frost.bench import backends, cases, environment, runner

    dtype = runner.TORCH_DTYPES[args.dtype]
    stem = _stem(args, which)
    report = Report(meta={**environment.meta(args.suite, dtype), "pass": which, "peer_smem": args.peer_smem})
    opts = runner.Options(dtype=dtype, warmup=args.warmup, iters=args.iters, budget_s=budget_s,
                          device=args.device, which=which, peer_smem=args.peer_smem)
    print(f"== pass {which}", flush=True)
    runner.run(list(cases.select(args.suite, args.cases)), backends.select(args.backends), opts, report,
               stem + ".json", log=lambda s: print(s, flush=True))
    report.meta["env"] = environment.meta(args.suite, dtype)["env"]       # after FA4 set its variables
    return report


def _finish(report, stem: str) -> int:
    from frost.bench.chart import write_chart
    from frost.bench.table import render

    text = render(report)
    with open(stem + ".txt", "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    try:
        print(write_chart(report, stem + ".png"))
    except Exception as exc:  # noqa: BLE001 -- the table and the JSON matter more than the picture
        print(f"chart failed: {type(exc).__name__}: {exc}")
    print(f"json: {stem}.json  table: {stem}.txt")
    print()
    print(text, flush=True)
    return 0
