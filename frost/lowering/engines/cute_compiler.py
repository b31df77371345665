"""The cute_sm120 engine's compiler seam: the one place its kernels compile (never at plan time), persist to the
disk cache and load back. compile_backward serves a backward's KernelConfig, compile_forward a ForwardConfig."""

from __future__ import annotations

from frost.lowering.compiler import KernelUnit, register_default
from frost.lowering.disk_cache import package_version
from frost.lowering.engines import cute_persist

ENGINE = "cute_sm120"


class CuteCompiler:
    """The real compiler: compile_backward for a backward's KernelConfig, compile_forward for a ForwardConfig; both
    persist through cute_persist."""

    device_type = "cuda"

    def __init__(self) -> None:  # the launcher ABI is in the name: entries of the plain-ABI era never load
        self.name = f"cute-dsl-{package_version('nvidia-cutlass-dsl')}-tvmffi"

    def compile(self, unit: KernelUnit):
        if is_forward_config(unit.config):
            from frost.kernels.forward import api as forward_api

            return forward_api.compile_forward(unit.config)
        from frost.kernels.backward import api

        return api.compile_backward(unit.config)

    def serialize(self, kernel, unit: KernelUnit) -> bytes:
        if is_forward_config(unit.config):
            return cute_persist.export_forward(kernel)
        return cute_persist.export_set(kernel)

    def deserialize(self, data: bytes, unit: KernelUnit):
        if is_forward_config(unit.config):
            return cute_persist.load_forward(data, unit.config)
        return cute_persist.load_set(data, unit.config)

    def bind(self, kernel, config):
        if is_forward_config(config):
            from frost.kernels.forward.api import CompiledForward

            return CompiledForward(config, kernel=kernel.kernel)
        return kernel.with_config(config)


def is_forward_config(config) -> bool:
    from frost.kernels.forward.api import ForwardConfig

    return isinstance(config, ForwardConfig)


register_default(ENGINE, CuteCompiler)
