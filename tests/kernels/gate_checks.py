"""What every compile gate checks of a cubin, whichever kernel family built it: the CUDA binary tools it needs, no
local memory (spills or a stack frame), and mma.sync / ldmatrix in the SASS. Targets and the shared-memory limit are
the SM120 class's."""

from __future__ import annotations

import re
import subprocess

import pytest

from frost.limits import SMEM_BYTES
from tools.sass import PIP_HINT, find_tool

ARCHS = ("sm_120a", "sm_90a")
SMEM_LIMIT = SMEM_BYTES


def tool(name: str) -> str:
    """The path of a CUDA binary tool (cuobjdump, nvdisasm); the test fails, saying how to install it, without."""
    found = find_tool(name)
    if found is None:
        pytest.fail(f"{name} not found: {PIP_HINT}")
    return found


def local_memory_problems(where: str, resources: dict) -> list[str]:
    """A function's resource usage (tools.sass.resources_by_function) may hold no local memory."""
    return [f"{where}: local memory (spill/stack) {resources}"] if resources["STACK"] or resources["LOCAL"] else []


def sass_problems(nvdisasm: str, cubin: str, where: str) -> list[str]:
    """The cubin's SASS: no local-memory instructions, and mma.sync m16n8k16 with ldmatrix present."""
    sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
    problems = []
    if re.search(r"\b(STL|LDL)\b", sass):
        problems.append(f"{where}: local-memory instructions (STL/LDL) in the SASS")
    if "HMMA.16816.F32" not in sass or "LDSM.16" not in sass:
        problems.append(f"{where}: no HMMA.16816.F32 / LDSM in the SASS")
    return problems
