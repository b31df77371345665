"""SASS and resource facts of a cubin, through the CUDA binary utilities (cuobjdump, nvdisasm).

They come from the pip wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm (or a CUDA toolkit on PATH): the DSL
only writes disassembly itself when the compile arch equals the machine's GPU, which never holds on a CPU box."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

PIP_HINT = "pip install 'nvidia-cuda-cuobjdump>=13.4,<14' 'nvidia-cuda-nvdisasm>=13.4,<14'"


def find_tool(name: str) -> str | None:
    """Path of a CUDA binary utility: PATH first, then the nvidia/*/bin folders of pip wheels."""
    found = shutil.which(name)
    if found:
        return found
    for base in sys.path:
        hits = glob.glob(os.path.join(base, "nvidia", "*", "bin", name))
        if hits:
            return hits[0]
    return None


def _run_on_cubin(tool: str, args: list[str], cubin: bytes) -> str:
    path = find_tool(tool)
    if path is None:
        raise FileNotFoundError(f"{tool} not found: {PIP_HINT}")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([path, *args, f.name], capture_output=True, text=True, check=True).stdout


def disassemble(cubin: bytes) -> str:
    """The SASS text of a cubin (nvdisasm -c)."""
    return _run_on_cubin("nvdisasm", ["-c"], cubin)


def resource_usage(cubin: bytes) -> dict[str, int]:
    """REG / STACK / SHARED / LOCAL / ... of the (first) kernel in a cubin (cuobjdump --dump-resource-usage)."""
    out = _run_on_cubin("cuobjdump", ["--dump-resource-usage"], cubin)
    line = next((ln for ln in out.splitlines() if "REG:" in ln), "")
    return {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}


def count(sass: str, mnemonic: str) -> int:
    """How many instructions of the SASS start with `mnemonic` (e.g. "HMMA.16816")."""
    return len(re.findall(r"\b" + re.escape(mnemonic), sass))
