"""Compile gate of the forward kernel (CPU, no GPU): builds every forward set (tiles.served_forward_pads: the nine
pads with V padded like Q/K, plus 192/128) for both dtypes and both targets (sm_120a, sm_90a), dense and packed
(varlen), and checks the
machine code: HMMA (mma.sync) and LDSM (ldmatrix) in the SASS, no local memory (no spills, no stack frame), and
shared memory within the SM120 limit (99 KB). Compiles run in parallel processes (one per CPU).

Needs cuobjdump and nvdisasm: pip packages nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm (>=13.4,<14)."""

import os
import tempfile
from concurrent.futures import ProcessPoolExecutor

import pytest

from gate_checks import ARCHS, SMEM_LIMIT, local_memory_problems, sass_problems, tool
from tools.sass import resources_by_function

pytestmark = pytest.mark.compile_gate


def _keys():
    from frost.kernels.forward.select import DTYPES, ForwardKey
    from frost.kernels.forward.tiles import served_forward_pads

    return [ForwardKey(dt, d, dv, arch, varlen) for arch in ARCHS for dt in DTYPES for d, dv in served_forward_pads()
            for varlen in (False, True)]


def _build(key, outdir):
    """Child process: compile one forward set, write its cubin; return (key, smem bytes, cubin path)."""
    from frost.kernels.forward.compile import compile_forward_kernel

    k = compile_forward_kernel(key, keep_cubin=True)
    path = os.path.join(outdir, key.as_str().replace(":", "_").replace(".", "_") + ".cubin")
    with open(path, "wb") as f:
        f.write(k.cubin)
    return key, k.smem_bytes, path


def test_forward_compile_gate():
    from frost.kernels.forward.compile import KERNEL_NAME

    tool("cuobjdump")
    nvdisasm = tool("nvdisasm")
    keys = _keys()
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        built = list(pool.map(_build, keys, [tmp] * len(keys)))
        problems = []
        for key, smem, cubin in built:
            tag = key.as_str()
            with open(cubin, "rb") as f:
                resources = resources_by_function(f.read())
            if len(resources) != 1 or KERNEL_NAME not in next(iter(resources)):
                problems.append(f"{tag}: functions {[name[:80] for name in resources]}, expected one {KERNEL_NAME}")
            for res in resources.values():
                problems += local_memory_problems(tag, res)
                if smem + res["SHARED"] > SMEM_LIMIT:
                    problems.append(f"{tag}: shared memory {smem} + {res['SHARED']} > {SMEM_LIMIT}")
            problems += sass_problems(nvdisasm, cubin, tag)
        assert not problems, "\n".join(problems)
    assert len(built) == len(keys) == 2 * 2 * 10 * 2
