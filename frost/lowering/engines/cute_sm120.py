"""The cute_sm120 engine adapter: picks the kernel config for an op's Facts (the forward's, or the backward's kernel
set), gets the compiled kernel through compiler.compiled_kernel (compiling through the compiler seam,
cute_compiler.CuteCompiler, only on a miss), and launches it on caller-owned memory.

The forward needs no workspace, and its launch allocates nothing and never synchronises (a length check, when on,
checks the lengths without a sync by default: see length_checks.check_mode). Everything but the dtype, the head-dim
pads and the arch is a runtime argument of the forward kernel, so its compile key holds no feature flags: a sink,
GQA, padding or another mask never compiles a second kernel."""

from __future__ import annotations

import math
from operator import itemgetter

from frost import spec
from frost.analyzer.facts import Facts
from frost.limits import TARGET_ARCHS
from frost.lowering.compiler import KernelUnit, compiled_kernel, get_compiler
from frost.lowering.engines.cute_compiler import ENGINE
from frost.lowering.engines.length_checks import call_lengths
from frost.lowering.keys import compile_key, op_signatures, runtime_features_key
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
    kernel = compiler.bind(compiled_kernel(compiler, KernelUnit(ENGINE, key, arch, cfg)), cfg)
    run, run_seq_major = _forward_launchers(kernel, op, facts)
    grid = (-(-facts.seq_q // cfg.key.tile.m_block), facts.heads_q, facts.batch)
    return Lowering(kernels=(KernelLaunch(f"{op.name}/forward", key, grid),), workspace=(), run=run,
                    device_type=compiler.device_type, aligned_pointers=True, run_seq_major=run_seq_major)


def _forward_launchers(kernel, op, facts: Facts):
    """The op's run(tensors, workspace, stream) over logical (B, H, S, D) tensors, and its twin for 4-D tensors in
    (B, S, H, D) order (Lowering.run_seq_major), both calling the kernel (a CompiledForward, or a test fake that
    records its calls) bound once to the plan's scale and mask. The executor has checked every tensor against the
    plan before run, so a call only gathers its tensors into one launch.ForwardTensors and launches."""
    from frost.kernels.forward.launch import ForwardTensors

    ins, outs = op.inputs, op.outputs
    operands = itemgetter(ins.q, ins.k, ins.v, outs.o, outs.lse)
    optional = spec.optional_ports("forward", ins, outs)
    bound = kernel.bind(facts.attn_scale, facts.mask)
    lengths = call_lengths(ins, facts)

    def run(tensors: dict, workspace: dict, stream, seq_major: bool = False) -> None:
        given = {role: tensors[name] for role, name in optional.items()}
        packed = None if lengths is None else lengths(tensors)
        bound(ForwardTensors(*operands(tensors), given, packed), stream, seq_major=seq_major)

    return run, lambda tensors, workspace, stream: run(tensors, workspace, stream, seq_major=True)


def _grid(cfg, facts: Facts) -> tuple[int, int, int]:
    """The main kernel's grid: a CTA per KV tile, per kv head (walking its GQA group), per batch (the launch may
    order these axes differently: frost.kernels.backward.ordering.block_order)."""
    return (-(-facts.seq_kv // cfg.tile.n_block), facts.heads_kv, facts.batch)


def _config(facts: Facts, arch: str, problem):
    """The plan's config: the kernel set select.select picks for the plan's problem (its mask, mode, GQA group
    and sizes: a dq_gemm set's problem whose dS workspace would pass DQ_GEMM_MAX_BYTES runs on the ordered or
    atomic set). The plan names, compiles and persists that set, and the launch runs it as given."""
    from frost.kernels.backward import api
    from frost.kernels.backward.select import Sizes

    p = problem
    return api.choose_config(facts.dtype, facts.head_dim_qk, facts.head_dim_v, arch=arch, **facts.mask.keywords(),
                             deterministic=p.deterministic, varlen=facts.varlen,
                             sizes=Sizes(p.batch, p.heads, p.heads_kv, p.seq_q, p.seq_kv))


def _problem(op, facts: Facts, scratch: tuple[str, ...]):
    """The plan's launch.Problem: its sizes, scale, mask, mode and which optional tensors its calls pass (the op's,
    and the ``scratch`` outputs the engine adds)."""
    from frost.kernels.backward.launch import Problem

    passed = frozenset(spec.optional_ports("backward", op.inputs, op.outputs)) | set(scratch)
    return Problem(facts.batch, facts.heads_q, facts.heads_kv, facts.seq_q, facts.seq_kv, facts.attn_scale,
                   facts.mask, facts.deterministic, passed,
                   tokens_q=facts.tokens_q if facts.varlen else 0, tokens_kv=facts.tokens_kv if facts.varlen else 0)


def _scratch_outputs(op) -> tuple[str, ...]:
    """The optional outputs the kernels write whenever their input is given (a gradient, such as dsink) that the
    op does not want: each gets a workspace region of its own ("<role>_scratch") for the kernels to write."""
    given = spec.optional_ports("backward", op.inputs, op.outputs)
    return tuple(t.role for t in spec.kernel_optional("backward")
                 if t.grad_of is not None and t.grad_of in given and t.role not in given)


def _scratch_bytes(role: str, facts: Facts) -> int:
    """A scratch output's size from its frost.spec shape (its fp32 / int32 elements: 4 bytes each)."""
    dims = {"B": facts.batch, "Hq": facts.heads_q, "Sq": facts.seq_q, "Tq": facts.tokens_q}
    return math.prod(spec.ROLES[role].extents(dims, facts.varlen)) * 4


class CuteSm120Engine:
    name = ENGINE

    def lower(self, graph, op, facts: Facts, target: str) -> Lowering:
        if op.op == "sdpa_forward":
            return lower_forward(graph, op, facts, target)
        from frost.kernels.backward import api

        arch = TARGET_ARCHS[target]
        scratch = _scratch_outputs(op)
        problem = _problem(op, facts, scratch)
        cfg = _config(facts, arch, problem)
        key = compile_key(ENGINE, api.compile_key(cfg), facts, op_signatures(graph, op))
        compiler = get_compiler(ENGINE)
        kernel = compiler.bind(compiled_kernel(compiler, KernelUnit(ENGINE, key, arch, cfg)), cfg)
        regions = [(n, int(b)) for n, b in api.workspace_regions(cfg, facts.batch, facts.heads_q, facts.seq_q,
                                                                     facts.seq_kv, heads_kv=facts.heads_kv,
                                                                     tokens_q=problem.tokens_q)]
        regions += [(f"{role}_scratch", api.round_up16(_scratch_bytes(role, facts))) for role in scratch]
        run, run_seq_major = _backward_launchers(kernel, op, facts, problem, scratch)
        return Lowering(kernels=(KernelLaunch(f"{op.name}/backward", key, _grid(cfg, facts)),),
                        workspace=tuple(regions), run=run, device_type=compiler.device_type, aligned_pointers=True,
                        run_seq_major=run_seq_major)


def _backward_launchers(kernel, op, facts: Facts, problem, scratch: tuple[str, ...]):
    """The op's run(tensors, workspace, stream) and its (B, S, H, D)-order twin (Lowering.run_seq_major). The
    kernel set (CompiledBackward, or a test fake with the same ``bind``) is bound to the plan's problem once,
    here: the executor has checked every tensor against the plan before run, so a call only gathers its tensors
    (and the ``scratch`` outputs' workspace regions) into one launch.BackwardTensors and launches."""
    from frost.kernels.backward.launch import BackwardTensors

    ins, outs = op.inputs, op.outputs
    operands = itemgetter(ins.q, ins.k, ins.v, ins.o, ins.do, ins.lse, outs.dq, outs.dk, outs.dv)
    optional = spec.optional_ports("backward", ins, outs)
    lengths = call_lengths(ins, facts)
    launch = kernel.bind(problem)

    def run(tensors: dict, workspace: dict, stream, seq_major: bool = False) -> None:
        given = {role: tensors[name] for role, name in optional.items()}
        for role in scratch:
            given[role] = workspace[f"{role}_scratch"]   # only its address is used
        packed = None if lengths is None else lengths(tensors)
        launch(BackwardTensors(*operands(tensors), workspace, given, packed), stream, seq_major=seq_major)

    return run, lambda tensors, workspace, stream: run(tensors, workspace, stream, seq_major=True)
