"""Compile gate (CPU, no GPU): builds every kernel set the cute_sm120 engine serves, for sm_120a and sm_90a, and
checks the machine code (one cubin per set: the preprocess, main and dQ-convert kernels behind one host entry, and
the dQ GEMM kernel in the dq_gemm sets):
the SASS has HMMA (mma.sync) and LDSM (ldmatrix); no kernel uses local memory (no spills, no stack frame); the
main kernel's shared memory fits the SM120 limit (99 KB).

The served set is small by design: the compiled code depends only on (dtype, padded head dims, arch, dQ order)
-- logical head dims, sequence lengths (full and per batch), strides, the mask (band bounds, alignment), the GQA
group and the sink are runtime values -- so 2 dtypes x 10 padded head-dim pairs (the 9 pads, V padded like Q/K,
plus 192/128 with narrower V tiles: catalogue.served_pads) x 2 archs x 2 dQ orders (atomic; ordered, for
deterministic mode and narrow bands: KernelKey.ordered) = 80 kernel sets cover every head dim (multiple of 8,
<= 256, Dv <= Dqk) and feature combination; problems without GQA get d64's atomic set compiled with other ptxas
options (catalogue.MHA_PTXAS, KernelKey.mha: 4 more sets), and the dq_gemm sets (catalogue.DQ_GEMM_TILES,
KernelKey.dq_gemm: the main kernel storing dS, then the dQ GEMM kernel; d96/d128 deterministic, d160/d192/d256
both modes: 24 more) and the narrow-band sets (catalogue._NARROW_CHANGES, KernelKey.narrow: ordered dQ on narrow bands
at d32-d128: 24 more), and the packed (varlen) twins of the atomic, ordered and MHA sets (KernelKey.varlen: 84 more);
select.served_keys lists them. The unserved 2-D warp-grid kernel variants
(catalogue.GRID_VARIANTS, bf16) are built and checked
too. Compiles run in parallel processes (one per CPU).

Needs cuobjdump and nvdisasm: pip packages nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm (>=13.4,<14)."""

import os
import tempfile
from concurrent.futures import ProcessPoolExecutor

import pytest

from gate_checks import ARCHS, SMEM_LIMIT, local_memory_problems, sass_problems, tool
from tools.sass import resources_by_function

pytestmark = pytest.mark.compile_gate


def _builds():
    """(key, tile override, label): every served set, plus the unserved grid-kernel variants (bf16) so that code
    keeps building too."""
    from frost.kernels.backward.catalogue import GRID_VARIANTS
    from frost.kernels.backward.select import KernelKey, served_keys

    served = [(key, None, "") for key in served_keys(ARCHS, varlen=True)]
    variants = [(KernelKey("bfloat16", t.head_dim_pad, arch), t, name) for arch in ARCHS
                for name, t in GRID_VARIANTS.items()]
    return served, variants


def _tag(key, label: str) -> str:
    """arch/dtype/d<Q/K pad>v<V pad><label>: how a built set is named in file names and problems."""
    order = "/ordered" if key.ordered else ""
    kind = "/mha" if key.mha else "/dq_gemm" if key.dq_gemm else "/narrow" if key.narrow else ""  # (V pad 0: like Q/K)
    packed = "/varlen" if key.varlen else ""
    return (f"{key.arch}/{key.dtype}/d{key.head_dim_pad}v{key.head_dim_v_pad or key.head_dim_pad}{order}{kind}{packed}"
            f"{label}")


def _build(item, outdir):
    """Child process: compile one kernel set, write its cubin; return (key, label, main smem bytes, cubin path)."""
    from frost.kernels.backward.compile import compile_kernels

    key, tile, label = item
    ks = compile_kernels(key, keep_cubin=True, tile=tile)
    path = os.path.join(outdir, _tag(key, label).replace("/", "_") + ".cubin")
    with open(path, "wb") as f:
        f.write(ks.cubins["backward"])
    return key, label, ks.main_smem_bytes, path


def _resources(cubin: str) -> dict:
    """kernel name -> resource usage, for every function of the one cubin the backward compiles to."""
    from frost.kernels.backward.compile import kernel_role

    with open(cubin, "rb") as f:
        return {kernel_role(function): res for function, res in resources_by_function(f.read()).items()}


def test_compile_gate():
    from frost.kernels.backward.catalogue import DQ_GEMM_TILES, MHA_PTXAS, narrow_pads, served_pads

    tool("cuobjdump")
    nvdisasm = tool("nvdisasm")
    served, variants = _builds()
    items = served + variants
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        built = list(pool.map(_build, items, [tmp] * len(items)))
        problems = []
        for key, label, smem, cubin in built:
            tag = _tag(key, label)
            resources = _resources(cubin)
            expected = {"preprocess", "main", "dq_convert"} | ({"dq_gemm"} if key.dq_gemm else set())
            if set(resources) != expected:
                problems.append(f"{tag}: kernels {sorted(resources)} in the cubin, expected {sorted(expected)}")
            for name, res in resources.items():
                problems += local_memory_problems(f"{tag} {name}", res)
            problems += sass_problems(nvdisasm, cubin, tag)
            if "main" in resources and smem + resources["main"]["SHARED"] > SMEM_LIMIT:
                problems.append(f"{tag} main: shared memory {smem} + {resources['main']['SHARED']} > {SMEM_LIMIT}")
        assert not problems, "\n".join(problems)
    dense = len(served_pads()) * 2 + len(MHA_PTXAS) + len(DQ_GEMM_TILES) + len(narrow_pads())
    packed = len(served_pads()) * 2 + len(MHA_PTXAS)   # (no dq_gemm or narrow-band set takes packed problems)
    assert len(served) == 2 * 2 * (dense + packed)
    assert len(built) == len(items)
