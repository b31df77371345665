"""The cute_sm120 engine's forward: picks the forward kernel's config for the op's Facts, gets the compiled kernel
from the kernel cache (compiling through the compiler seam only on a miss), and launches it on caller-owned memory.

The forward needs no workspace, and its launch allocates nothing and never synchronises (a length check, when on,
checks the lengths without a sync by default: see length_checks.check_mode). Everything but the dtype, the head-dim pads and the
arch is a runtime argument of the kernel, so the compile key holds no feature flags: a sink, GQA, padding or
another mask never compiles a second kernel."""

from __future__ import annotations

from operator import itemgetter

from frost import spec
from frost.analyzer.facts import Facts
from frost.lowering.compiler import KernelUnit, get_compiler
from frost.limits import TARGET_ARCHS
from frost.lowering.engines.cute_compiler import ENGINE
from frost.lowering.engines.length_checks import call_lengths
from frost.lowering.kernel_cache import KERNELS
from frost.lowering.keys import op_signatures, runtime_features_key
from frost.lowering.plan import KernelLaunch, Lowering


def forward_config(facts: Facts, arch: str):
    """The forward kernel's config (dtype, logical head dims and their pads, arch) for these Facts."""
    from frost.kernels.forward import api

    return api.choose_forward_config(facts.dtype, facts.head_dim_qk, facts.head_dim_v, arch, varlen=facts.varlen)


def lower_forward(graph, op, facts: Facts, target: str) -> Lowering:
    from frost.kernels.forward import api

    arch = TARGET_ARCHS[target]
    cfg = forward_config(facts, arch)
    key = runtime_features_key(ENGINE, api.forward_compile_key(cfg), op_signatures(graph, op))
    compiler = get_compiler(ENGINE)
    kernel = compiler.bind(KERNELS.get(compiler, KernelUnit(ENGINE, key, arch, cfg)), cfg)
    run, run_seq_major = _launchers(kernel, op, facts)
    grid = (-(-facts.seq_q // cfg.key.tile.m_block), facts.heads_q, facts.batch)
    return Lowering(kernels=(KernelLaunch(f"{op.name}/forward", key, grid),), workspace=(), run=run,
                    device_type=compiler.device_type, aligned_pointers=True, run_seq_major=run_seq_major)


def _launchers(kernel, op, facts: Facts):
    """The op's run(tensors, workspace, stream) over logical (B, H, S, D) tensors, and its twin for 4-D tensors in
    (B, S, H, D) order (Lowering.run_seq_major), both calling the kernel (a CompiledForward, or a test fake that
    records its calls) bound once to the plan's scale and mask. The executor has checked every tensor against the
    plan before run, so a call only gathers its tensors into one launch.ForwardTensors and launches."""
    from frost.kernels.forward.launch import ForwardMask, ForwardTensors

    ins, outs = op.inputs, op.outputs
    operands = itemgetter(ins.q, ins.k, ins.v, outs.o, outs.lse)
    optional = spec.optional_ports("forward", ins, outs)
    bound = kernel.bind(ForwardMask(facts.attn_scale, op.causal, op.alignment, op.band_left, op.band_right))
    lengths = call_lengths(ins, facts)

    def run(tensors: dict, workspace: dict, stream, seq_major: bool = False) -> None:
        extra = {key: tensors[name] for key, name in optional.items()}
        packed = None if lengths is None else lengths(tensors)
        bound(ForwardTensors(*operands(tensors), packed=packed, **extra), stream, seq_major=seq_major)

    return run, lambda tensors, workspace, stream: run(tensors, workspace, stream, seq_major=True)
