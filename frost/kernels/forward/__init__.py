"""The SM120-class attention forward (FlashAttention-2 style, Q-stationary): O and the natural-log LSE with the
sink term, the contract the backward reads. Its modules have the backward's roles: tiles, select, compile, launch,
checks, api, and the device kernel (kernel.py)."""

from frost.kernels.forward.api import (CompiledForward, ForwardConfig, choose_forward_config, compile_forward,
                                       forward_compile_key)

__all__ = ["CompiledForward", "ForwardConfig", "choose_forward_config", "compile_forward", "forward_compile_key"]
