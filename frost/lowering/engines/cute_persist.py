"""Persisting a compiled CuTe kernel set across processes: each of its TVM-FFI cute.compile results (compile.FUNCS:
the one host entry that launches preprocess, main and dq convert; for the forward, its one kernel) is exported as a
relocatable object holding the host launcher and the cubin (`export_to_c`, which names the launcher
`__tvm_ffi_<prefix>`), and loaded back with `cutlass.cute.runtime.load_module(..., enable_tvm_ffi=True)` as a raw
tvm_ffi.Function, so a new process skips compilation."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import tempfile
import time

log = logging.getLogger("frost")


def _prefix(name: str) -> str:
    return f"frost_bwd_{name}"


def _export(compiled_fn, name: str, symbol: str | None = None) -> bytes:
    with tempfile.TemporaryDirectory(prefix="frost-export-") as tmp:
        path = os.path.join(tmp, f"{name}.o")
        compiled_fn.export_to_c(path, function_name=symbol or _prefix(name))
        with open(path, "rb") as fh:
            return fh.read()


def export_set(compiled) -> bytes:
    """Bytes of a CompiledBackward's kernel set: a JSON header (sizes, main smem) then the exported objects."""
    from frost.kernels.backward.compile import FUNCS   # imports the DSL: only a real kernel set is exported

    kernels = compiled.kernels
    if set(kernels.compiled) != set(FUNCS):
        raise ValueError("only a freshly compiled kernel set can be exported (this one was loaded)")
    blobs = [_export(kernels.compiled[name], name) for name in FUNCS]
    header = json.dumps({"funcs": FUNCS, "sizes": [len(b) for b in blobs],
                         "main_smem_bytes": kernels.main_smem_bytes}).encode()
    return struct.pack("<I", len(header)) + header + b"".join(blobs)


def _split(data: bytes) -> tuple[dict, list[bytes]]:
    from frost.kernels.backward.compile import FUNCS

    (n,) = struct.unpack_from("<I", data)
    header = json.loads(data[4:4 + n])
    if tuple(header["funcs"]) != FUNCS or sum(header["sizes"]) != len(data) - 4 - n:
        raise ValueError("kernel set entry does not match this frost's kernels")
    blobs, at = [], 4 + n
    for size in header["sizes"]:
        blobs.append(data[at:at + size])
        at += size
    return header, blobs


def _load(blob: bytes, name: str, symbol: str | None = None):
    from cutlass.cute.runtime import load_module

    start = time.perf_counter()
    fd, path = tempfile.mkstemp(suffix=".o")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        module = load_module(path, enable_tvm_ffi=True)  # reads the object into memory; the file can go
    finally:
        os.unlink(path)
    fn = getattr(module, symbol or _prefix(name))
    log.debug("frost: loaded kernel %s (%d bytes) in %.3f s", name, len(blob), time.perf_counter() - start)
    return module, fn


def load_set(data: bytes, cfg):
    """A CompiledBackward for `cfg` whose kernels come from `export_set`'s bytes (no compilation)."""
    from frost.kernels.backward.api import CompiledBackward
    from frost.kernels.backward.compile import FUNCS, CompiledKernels

    header, blobs = _split(data)
    loaded = [_load(blob, name) for blob, name in zip(blobs, FUNCS)]
    kernels = CompiledKernels(cfg.key, *(fn for _, fn in loaded), header["main_smem_bytes"])
    kernels.modules = [module for module, _ in loaded]  # keep the loaded code alive with the kernels
    return CompiledBackward(cfg, kernels, selected=True)


def _forward_symbol(key: str) -> str:
    """The launcher's name in the exported object: one per kernel key, so loaded kernels never share a name."""
    return "frost_fwd_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def export_forward(compiled) -> bytes:
    """Bytes of a CompiledForward's kernel: a JSON header (its key and shared memory) then the exported object."""
    kernel = compiled.kernel
    if kernel.compiled is None:
        raise ValueError("only a freshly compiled forward kernel can be exported (this one was loaded)")
    blob = _export(kernel.compiled, "forward", _forward_symbol(kernel.key.as_str()))
    header = json.dumps({"key": kernel.key.as_str(), "size": len(blob), "smem_bytes": kernel.smem_bytes}).encode()
    return struct.pack("<I", len(header)) + header + blob


def load_forward(data: bytes, cfg):
    """A CompiledForward for `cfg` whose kernel comes from `export_forward`'s bytes (no compilation)."""
    from frost.kernels.forward.api import CompiledForward
    from frost.kernels.forward.compile import CompiledForwardKernel

    (n,) = struct.unpack_from("<I", data)
    header = json.loads(data[4:4 + n])
    blob = data[4 + n:]
    if header.get("key") != cfg.key.as_str() or header.get("size") != len(blob):
        raise ValueError("forward kernel entry does not match this frost's kernel for this config")
    module, fn = _load(blob, "forward", _forward_symbol(header["key"]))
    kernel = CompiledForwardKernel(cfg.key, fn, header["smem_bytes"])
    kernel.modules = [module]  # keep the loaded code alive with the kernel
    return CompiledForward(cfg, kernel=kernel)
