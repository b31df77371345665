"""A CuTe-DSL peer's kernels launched at SM120's occupancy, as frost launches its own.

On a bigger SM (the H100's and H200's 228 KB) frost's kernels request enough dynamic shared memory that no more CTAs
share an SM than would on SM120's 100 KB (kernels/arch.py, launch_smem_bytes). ``padded_launches`` does the same for
a peer written in CuTe-DSL (FlashAttention-4): while it is active, every kernel launch the DSL builds with a fixed
shared-memory size asks for ``launch_smem_bytes`` of it instead. FA4's SM80/SM120 kernels pass that size as a Python
int, so it is padded; a size the DSL infers itself, or a kernel not built by the DSL (torch's), is left alone.

The size is fixed when a kernel compiles, so the peer's calls run inside it from the first (compiling) one; a
kernel the peer compiled before, in this process or in its disk cache, keeps the size it was built with (the disk
cache of FA4 is refused here). frost's own kernels never compile inside it: they would be padded twice."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Iterator

from frost.kernels.arch import arch_config, detect_arch, launch_smem_bytes

FA4_DISK_CACHE = "FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED"


class PaddingUnavailable(RuntimeError):
    """The peer's kernels could come from somewhere padding does not reach (a disk cache of compiled kernels)."""


def padded_size(arch: str, smem: object) -> object:
    """The launch's shared memory for ``arch`` ("sm_90a", ...): a fixed int size padded to SM120's occupancy,
    anything else (None: the DSL infers it; a traced value) as it is."""
    if isinstance(smem, bool) or not isinstance(smem, int):
        return smem
    return launch_smem_bytes(arch_config(arch), smem)


@contextmanager
def padded_launches(arch: str | None = None) -> Iterator[None]:
    """Inside: CuTe-DSL kernels compiled for ``arch`` (None: the current device's) request SM120's occupancy of
    shared memory (a no-op where the arch is SM120's own). One peer at a time: the DSL's launch configuration is
    patched for the process."""
    if os.environ.get(FA4_DISK_CACHE, "0") == "1":
        raise PaddingUnavailable(f"{FA4_DISK_CACHE}=1: FA4 could load kernels compiled unpadded from its disk cache; "
                                 "unset it to time FA4 at SM120's occupancy")
    from cutlass.base_dsl.dsl import BaseDSL

    arch = arch or detect_arch()
    config = BaseDSL.LaunchConfig
    original = config.__post_init__

    def post_init(self) -> None:
        original(self)
        self.smem = padded_size(arch, self.smem)

    config.__post_init__ = post_init
    try:
        yield
    finally:
        config.__post_init__ = original



def padded_when(on: bool) -> AbstractContextManager:
    """padded_launches() (for the current device) when ``on``, else a context that changes nothing: what a peer's
    calls run inside when a run asks for padded launches."""
    return padded_launches() if on else nullcontext()


__all__ = ["PaddingUnavailable", "padded_launches", "padded_size", "padded_when"]
