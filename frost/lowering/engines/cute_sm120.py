"""The cute_sm120 engine adapter: picks the kernel config for the op's Facts, gets the compiled backward from the
kernel cache (compiling through the compiler seam only on a miss), and launches it on caller-owned memory.

cutlass is imported only by CuteCompiler.compile (frost.kernels.api's compile_backward), never at plan time."""

from __future__ import annotations

from operator import itemgetter

from frost.analyzer.facts import Facts
from frost.lowering.compiler import KernelUnit, get_compiler, register_default
from frost.lowering.disk_cache import package_version
from frost.lowering.engines import cute_persist
from frost.lowering.kernel_cache import KERNELS
from frost.lowering.keys import compile_key, op_signatures
from frost.lowering.plan import KernelLaunch, Lowering

ENGINE = "cute_sm120"
ARCHS = {"sm_90": "sm_90a", "sm_120": "sm_120a", "sm_121": "sm_121a"}


class CuteCompiler:
    """The real compiler: frost.kernels.api.compile_backward; kernel sets persist through cute_persist."""

    device_type = "cuda"

    def __init__(self) -> None:
        self.name = f"cute-dsl-{package_version('nvidia-cutlass-dsl')}"

    def compile(self, unit: KernelUnit):
        from frost.kernels import api

        return api.compile_backward(unit.config)

    def serialize(self, kernel, unit: KernelUnit) -> bytes:
        return cute_persist.export_set(kernel)

    def deserialize(self, data: bytes, unit: KernelUnit):
        return cute_persist.load_set(data, unit.config)

    def bind(self, kernel, config):
        return cute_persist.with_config(kernel, config)


register_default(ENGINE, CuteCompiler)


def _grid(cfg, facts: Facts) -> tuple[int, int, int]:
    """The main kernel's grid: a CTA per KV tile, per head, per batch (KV-stationary)."""
    return (-(-facts.seq_kv // cfg.tile.n_block), facts.heads_q, facts.batch)


def _config(facts: Facts, arch: str):
    from frost.kernels import api

    return api.choose_config(facts.dtype, facts.head_dim_qk, facts.head_dim_v, facts.mask == "causal",
                             facts.alignment, arch)


class CuteSm120Engine:
    name = ENGINE

    def lower(self, graph, op, facts: Facts, target: str) -> Lowering:
        from frost.kernels import api

        arch = ARCHS[target]
        cfg = _config(facts, arch)
        key = compile_key(ENGINE, api.compile_key(cfg), facts, op_signatures(graph, op))
        compiler = get_compiler(ENGINE)
        kernel = compiler.bind(KERNELS.get(compiler, KernelUnit(ENGINE, key, arch, cfg)), cfg)
        regions = tuple((n, int(b)) for n, b in api.workspace_regions(cfg, facts.batch, facts.heads_q, facts.seq_q,
                                                                      facts.seq_kv))
        return Lowering(kernels=(KernelLaunch(f"{op.name}/backward", key, _grid(cfg, facts)),), workspace=regions,
                        run=_launcher(kernel, op, facts.attn_scale), device_type=compiler.device_type,
                        aligned_pointers=True)


def _launcher(kernel, op, scale: float):
    ins, outs = op.inputs, op.outputs
    operands = itemgetter(ins.q, ins.k, ins.v, ins.o, ins.do, ins.lse, outs.dq, outs.dk, outs.dv)

    def run(tensors: dict, workspace: dict, stream) -> None:
        kernel(*operands(tensors), scale=scale, workspace=workspace, stream=stream)

    return run
