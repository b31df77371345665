"""Compile bench_variants.CANDIDATES for the compile targets without a GPU and report each kernel's registers and
local memory (spills), the check a candidate needs before a GPU run times it (benchmarks/ab_variants.py) and the
compile gate (tests/kernels/test_compile_gate.py) before it is served.

    python3 benchmarks/check_candidates.py [--candidates d256_dqg_1p,...] [--archs sm_120a,sm_90a]
                                           [--dtypes bfloat16,float16] [--jobs N]

One line per (candidate, set, arch, dtype): the main kernel's registers, stack and local bytes, its shared memory,
its static SASS counts (instructions, HMMA, LDSM, BAR, LDGSTS: a loop body's share of them is what a step issues),
and SPILL where any kernel of the set uses local memory; with --served, the same line for the served set first.
Exit status 1 when any candidate's set spills or fails to build."""

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _static_counts(cubin: bytes) -> str:
    """The main kernel's static SASS counts (what a loop body holds of them, a step issues)."""
    from tools.sass import count, disassemble, functions, instructions
    from frost.kernels.backward.compile import kernel_role

    main = next((text for name, text in functions(disassemble(cubin)).items() if kernel_role(name) == "main"), "")
    return f"instr {instructions(main)} " + " ".join(f"{op} {count(main, op)}" for op in ("HMMA", "LDSM", "BAR",
                                                                                          "LDGSTS"))


def check(item):
    """Child process: build one (candidate name or "served", key) and return its line and whether it is clean (a
    served set that spills is the compile gate's to report, not a candidate's failure)."""
    name, key_args = item
    from bench_variants import CANDIDATES
    from tools.ab import kernel_key
    from tools.sass import resources_by_function
    from frost.kernels.backward.compile import compile_kernels, kernel_role

    key, cand = kernel_key(*key_args), CANDIDATES.get(name)
    tag = f"{name:<22} {key_args[1]:<8} {key.arch:<8} {key.dtype:<9}"
    ptxas = cand.ptxas_for(key) if cand else None
    try:
        ks = compile_kernels(key, keep_cubin=True, tile=cand.tile(key) if cand else None, ptxas_options=ptxas)
        res = {kernel_role(f): r for f, r in resources_by_function(ks.cubins["backward"]).items()}
        counts = _static_counts(ks.cubins["backward"])
    except Exception as exc:  # noqa: BLE001 -- a candidate that does not build is a result
        return f"{tag} FAILED {type(exc).__name__}: {str(exc).splitlines()[0][:160]}", False
    main = res.get("main", {})
    spilled = sorted(k for k, r in res.items() if r.get("STACK") or r.get("LOCAL"))
    options = ptxas or key.ptxas_options or "(default)"
    line = (f"{tag} main REG {main.get('REG')} STACK {main.get('STACK')} LOCAL {main.get('LOCAL')} smem "
            f"{ks.main_smem_bytes} B  {counts}  ptxas {options}" + (f"  SPILL in {', '.join(spilled)}" if spilled
                                                                   else ""))
    return line, not spilled or cand is None


def main(argv=None) -> int:
    from bench_variants import CANDIDATES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", default=",".join(CANDIDATES))
    ap.add_argument("--archs", default="sm_120a,sm_90a")
    ap.add_argument("--dtypes", default="bfloat16,float16")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--served", action="store_true", help="also build each changed set as served, for comparison")
    args = ap.parse_args(argv)
    names = [n for n in args.candidates.split(",") if n]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        sys.exit(f"unknown candidates {unknown}; bench_variants.CANDIDATES has {sorted(CANDIDATES)}")
    items = [(n, (CANDIDATES[n].pad, kind, arch, dtype)) for n in names for kind in CANDIDATES[n].kinds
             for arch in args.archs.split(",") for dtype in args.dtypes.split(",")]
    if args.served:   # each changed set once as served, before the candidates
        items = [("served", k) for k in dict.fromkeys(k for _, k in items)] + items
    clean = True
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for line, ok in pool.map(check, items):
            print(line, flush=True)
            clean &= ok
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
