"""Compile gate (CPU, no GPU): builds every kernel set the cute_sm120 engine serves, for sm_120a and sm_90a, and
checks the machine code: the main kernel's SASS has HMMA (mma.sync) and LDSM (ldmatrix); no kernel uses local
memory (no spills, no stack frame); the main kernel's shared memory fits the SM120 limit (99 KB).

The served set is small by design: the compiled code depends only on (dtype, padded head dim, arch) -- logical
head dims, sequence lengths (full and per batch), strides, the mask (band bounds, alignment), the GQA group, the
sink and deterministic mode are runtime values -- so 2 dtypes x 8 padded head dims x 2 archs = 32 kernel sets
cover every head dim (multiple of 8, <= 256, Dv <= Dqk) and feature combination. The unserved 2-D warp-grid
kernel variants (tiles.GRID_VARIANTS, bf16) are built and checked too. Compiles run in parallel processes (one
per CPU).

Needs cuobjdump and nvdisasm: pip packages nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm (>=13.4,<14)."""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor

import pytest

pytestmark = pytest.mark.compile_gate

ARCHS = ("sm_120a", "sm_90a")
SMEM_LIMIT = 101376


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for base in sys.path:
        hits = glob.glob(os.path.join(base, "nvidia", "*", "bin", name)) + glob.glob(
            os.path.join(base, "nvidia", "cuda_*", "bin", name))
        if hits:
            return hits[0]
    pytest.fail(f"{name} not found: pip install 'nvidia-cuda-cuobjdump>=13.4,<14' 'nvidia-cuda-nvdisasm>=13.4,<14'")


def _builds():
    """(key, tile override, label): every served set, plus the unserved grid-kernel variants (bf16) so that code
    keeps building too."""
    from frost.kernels.compile import DTYPES, KernelKey
    from frost.kernels.tiles import GRID_VARIANTS, HEAD_DIM_PADS

    served = [(KernelKey(dt, d, arch), None, "") for arch in ARCHS for dt in DTYPES for d in HEAD_DIM_PADS]
    variants = [(KernelKey("bfloat16", t.head_dim_pad, arch), t, name) for arch in ARCHS
                for name, t in GRID_VARIANTS.items()]
    return served, variants


def _build(item, outdir):
    """Child process: compile one kernel set, write its cubins; return (key, label, smem bytes, cubin paths)."""
    from frost.kernels.compile import compile_kernels

    key, tile, label = item
    ks = compile_kernels(key, keep_cubin=True, tile=tile)
    paths = {}
    for name, blob in ks.cubins.items():
        paths[name] = os.path.join(outdir, f"{key.arch}_{key.dtype}_d{key.head_dim_pad}{label}_{name}.cubin")
        with open(paths[name], "wb") as f:
            f.write(blob)
    return key, label, ks.main_smem_bytes, paths


def _resources(cuobjdump: str, cubin: str) -> dict:
    out = subprocess.run([cuobjdump, "--dump-resource-usage", cubin], capture_output=True, text=True,
                         check=True).stdout
    line = next(ln for ln in out.splitlines() if "REG:" in ln)
    return {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}


def test_compile_gate():
    cuobjdump, nvdisasm = _tool("cuobjdump"), _tool("nvdisasm")
    served, variants = _builds()
    items = served + variants
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        built = list(pool.map(_build, items, [tmp] * len(items)))
        problems = []
        for key, label, smem, paths in built:
            tag = f"{key.arch}/{key.dtype}/d{key.head_dim_pad}{label}"
            for name, cubin in paths.items():
                res = _resources(cuobjdump, cubin)
                sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
                if res["STACK"] or res["LOCAL"] or re.search(r"\b(STL|LDL)\b", sass):
                    problems.append(f"{tag} {name}: local memory (spill/stack) {res}")
                if name == "main":
                    if "HMMA.16816.F32" not in sass or "LDSM.16" not in sass:
                        problems.append(f"{tag} main: no HMMA.16816.F32 / LDSM in SASS")
                    if smem + res["SHARED"] > SMEM_LIMIT:
                        problems.append(f"{tag} main: shared memory {smem} + {res['SHARED']} > {SMEM_LIMIT}")
        assert not problems, "\n".join(problems)
    assert len(served) == 2 * 2 * 8 and len(built) == len(items)
