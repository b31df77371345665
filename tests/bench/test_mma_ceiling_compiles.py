"""Compile gate for the mma.sync ceiling kernel (CPU, no GPU): it builds for sm_90a and sm_120a, and its SASS is
what the ceiling claims to measure -- HMMA.16816 with fp32 accumulation, no local memory (no spills), few enough
registers for 4 CTAs of 128 threads per SM.

Needs nvdisasm and cuobjdump: pip install 'nvidia-cuda-nvdisasm>=13.4,<14' 'nvidia-cuda-cuobjdump>=13.4,<14'."""

import pytest

from tools import sass

pytestmark = pytest.mark.compile_gate


@pytest.mark.parametrize("arch", ["sm_90a", "sm_120a"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_ceiling_kernel_sass(arch, dtype, tmp_path):
    pytest.importorskip("cutlass")
    from frost.bench.mma_ceiling import MIN_BLOCKS, WARPS, compile_ceiling

    for tool in ("nvdisasm", "cuobjdump"):
        if sass.find_tool(tool) is None:
            pytest.fail(f"{tool} not found: {sass.PIP_HINT}")
    compiled = compile_ceiling(dtype, arch, dump_dir=str(tmp_path))
    text = sass.disassemble(compiled.__cubin__)
    suffix = ".BF16" if dtype == "bfloat16" else ""
    assert sass.count(text, "HMMA.16816.F32" + suffix) > 0
    assert sass.count(text, "STL") == 0 and sass.count(text, "LDL") == 0
    res = sass.resource_usage(compiled.__cubin__)
    assert res["LOCAL"] == 0 and res["STACK"] == 0
    assert res["REG"] * WARPS * 32 * MIN_BLOCKS <= 65536
