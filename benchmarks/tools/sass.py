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
    return next(iter(resources_by_function(cubin).values()), {})


def resources_by_function(cubin: bytes) -> dict[str, dict[str, int]]:
    """Mangled function name -> REG / STACK / SHARED / LOCAL / ... for every kernel of a cubin."""
    out = _run_on_cubin("cuobjdump", ["--dump-resource-usage"], cubin)
    found, function = {}, None
    for line in out.splitlines():
        head = re.match(r"\s*Function (\S+):", line)
        if head:
            function = head.group(1)
        elif "REG:" in line and function:
            found[function] = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}
    return found


def functions(sass: str) -> dict[str, str]:
    """Function name -> its part of the SASS text (nvdisasm opens each with a '//---- .text.<name>' line)."""
    parts = re.split(r"^//-+ \.text\.(\S+).*$", sass, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def instructions(sass: str) -> int:
    """How many instructions the SASS text holds (lines with an address comment and an opcode)."""
    return len(re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?[A-Z]", sass))


def count(sass: str, mnemonic: str) -> int:
    """How many instructions of the SASS start with `mnemonic` (e.g. "HMMA.16816")."""
    return len(re.findall(r"\b" + re.escape(mnemonic), sass))
