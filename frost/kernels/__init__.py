"""CuTe-DSL attention-backward kernels for the SM120 class (mma.sync + ldmatrix + cp.async, <= 99 KB smem).
cutlass is imported lazily (only when a kernel set is compiled)."""

from frost.kernels.backward.api import (CompiledBackward, KernelConfig, choose_config, compile_backward, compile_key,
                               workspace_regions)
from frost.kernels.arch import detect_arch

__all__ = ["CompiledBackward", "KernelConfig", "choose_config", "compile_backward", "compile_key",
           "workspace_regions", "detect_arch"]
