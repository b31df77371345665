"""CuTe-DSL attention kernels for the SM120 class (mma.sync + ldmatrix + cp.async, <= 99 KB smem).

The pieces every kernel family shares sit here: arch (targets), mask (band, lengths, flags), cute_utils (copies,
layouts, MMA helpers), geometry (shared-memory tile geometry), graph_replay (CUDA-graph replay of a launch),
segments (packed sequences on the device) and packed (their host side). Each
family has a folder of its own: backward/ (its catalogue of kernel sets, their selection, kernels, compile and
launch). The engine limits the analyzer also reads live in frost/limits.py."""

from frost.kernels.backward.api import (CompiledBackward, KernelConfig, choose_config, compile_backward, compile_key,
                               workspace_regions)
from frost.kernels.arch import detect_arch

__all__ = ["CompiledBackward", "KernelConfig", "choose_config", "compile_backward", "compile_key",
           "workspace_regions", "detect_arch"]
