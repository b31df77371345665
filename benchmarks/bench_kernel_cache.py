"""Cold compile of a CuTe kernel set vs loading it from frost's disk cache, each in a fresh process (GPU machine).

The targets: cold compile <= 10 s, from the disk cache <= 0.5 s. Each child reports, each timed alone and in
this order: importing torch and cutlass, creating the CUDA context, importing frost, frost.compile (which compiles
or loads the kernels, and probes the graph or reads its probe report from the disk cache), and the first execute
(with synchronisation).

    python benchmarks/bench_kernel_cache.py [--dtype bfloat16] [--head-dim 64]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import json, logging, sys, time
    logging.basicConfig(level=logging.DEBUG, format="  child: %(message)s", stream=sys.stderr)
    for noisy in ("cutlass", "cutlass_dsl", "torch"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    t0 = time.perf_counter()
    import torch
    import cutlass.cute  # noqa: F401
    t1 = time.perf_counter()
    torch.empty(1, device="cuda")  # the CUDA context: any GPU program pays it once, cache or not
    torch.cuda.synchronize()
    tc = time.perf_counter()
    import frost.api.plans as api
    from frost.ir import sdpa_backward_graph
    from frost.lowering import cache_stats
    graph = sdpa_backward_graph(2, 4, 256, {head_dim}, dtype="{dtype}", causal=True)
    ti = time.perf_counter()
    plan = api.compile(graph)
    t2 = time.perf_counter()
    tensors = {{s.name: torch.randn(s.shape, device="cuda").to(getattr(torch, s.dtype))
               for s in graph.tensors if s.name in ("q", "k", "v", "o", "do", "lse")}}
    plan.execute(tensors, workspace=plan.new_workspace("cuda"))
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    print(json.dumps(dict(import_cutlass_s=t1 - t0, cuda_init_s=tc - t1, import_frost_s=ti - tc, compile_s=t2 - ti,
                          first_execute_s=t3 - t2,
                          engine=plan.engine, **cache_stats().as_dict())))
""")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--head-dim", type=int, default=64)
    args = p.parse_args()
    code = CHILD.format(dtype=args.dtype, head_dim=args.head_dim)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, FROST_CACHE_DIR=cache)
        for label in ("cold (compile)", "warm (disk cache)"):
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(proc.stderr[-4000:])
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"{label}: frost.compile {r['compile_s']:.2f} s (before it, each timed alone: import torch + "
                  f"cutlass {r['import_cutlass_s']:.2f} s, CUDA context {r['cuda_init_s']:.2f} s, import frost "
                  f"{r['import_frost_s']:.2f} s), first execute {r['first_execute_s']:.2f} s; engine {r['engine']}, "
                  f"compiles {r['compiles']}, disk hits {r['disk_hits']}, probe reports read from disk "
                  f"{r.get('report_hits', 0)}")
            print("\n".join(line for line in proc.stderr.splitlines() if "child:" in line))


if __name__ == "__main__":
    main()
