"""Small CuTe-DSL helpers shared by the kernels: shared-memory layouts and views, register-fragment views,
GEMM k-loops on mma.sync + ldmatrix, and zero-filling tile loads."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64
from cutlass._mlir.dialects import arith, llvm
from cutlass.cutlass_dsl import dsl_user_op

from frost.kernels.geometry import swizzle_atom_cols

_SWIZZLE_BY_ATOM_COLS = {64: 3, 32: 2, 16: 1}


def smem_tile_layout(rows: int, cols: int, stages: int | None = None):
    """A (rows, cols[, stages]) 16-bit tile with cols contiguous, XOR-swizzled in 8-row atoms so that ldmatrix
    (plain and .trans) and 16-byte cp.async stores hit distinct banks."""
    atom_cols = swizzle_atom_cols(cols)
    atom = cute.make_composed_layout(
        cute.make_swizzle(_SWIZZLE_BY_ATOM_COLS[atom_cols], 3, 3), 0,
        cute.make_layout((8, atom_cols), stride=(atom_cols, 1)))
    if stages is None:
        return cute.tile_to_shape(atom, (rows, cols), (0, 1))
    return cute.tile_to_shape(atom, (rows, cols, stages), (0, 1, 2))


def bhsd_tensor(ptr: cute.Pointer, batch, heads, seqlen, head_dim, sb, sh, ss) -> cute.Tensor:
    """A (batch, heads, seqlen, head_dim) tensor over ``ptr`` with runtime batch/head/row strides, which are
    multiples of 8 elements (api's input check: 16-byte aligned rows, what the 16-byte copies need), and the head
    dim contiguous."""
    stride = (cute.assume(sb, divby=8), cute.assume(sh, divby=8), cute.assume(ss, divby=8), 1)
    return cute.make_tensor(ptr, cute.make_layout((batch, heads, seqlen, head_dim), stride=stride))


def transpose_view(t: cute.Tensor, rows: int, cols: int, stages: int | None = None) -> cute.Tensor:
    """(rows, cols[, stages]) -> (cols, rows[, stages]) view of the same memory."""
    if stages is None:
        return cute.composition(t, cute.make_layout((cols, rows), stride=(rows, 1)))
    return cute.composition(t, cute.make_layout((cols, rows, stages), stride=(rows, 1, rows * cols)))


def first_stage(t: cute.Tensor) -> cute.Tensor:
    """A (rows, cols[, stages]) shared-memory tensor's first stage (the tensor itself when it has no stage
    mode): what a register fragment for it is shaped from."""
    return t[None, None, 0] if cute.rank(t.layout) == 3 else t


def ldsm_operands(table: dict) -> dict:
    """name -> (tiled ldmatrix copy, register fragment, shared-memory tensor) gives rX (the fragment), rX_v (its
    view for the copy) and sX (the copy's partition of the tensor): what gemm_ss / gemm_rs / gemm_sr take."""
    out = {}
    for name, (copy, frag, src) in table.items():
        out[f"r{name}"], out[f"r{name}_v"], out[f"s{name}"] = frag, copy.retile(frag), copy.partition_S(src)
    return out


def acc_mn_view(acc: cute.Tensor) -> cute.Tensor:
    """mma.sync accumulator ((2,2), MMA_M, MMA_N) viewed as (rows, cols) of this thread."""
    lay = cute.make_layout(acc.layout.shape)
    mn = cute.make_layout(
        ((lay.shape[0][1], lay.shape[1]), (lay.shape[0][0], lay.shape[2])),
        stride=((lay.stride[0][1], lay.stride[1]), (lay.stride[0][0], lay.stride[2])))
    return cute.make_tensor(acc.iterator, cute.composition(acc.layout, mn))


def mn_transpose(t: cute.Tensor) -> cute.Tensor:
    """(rows, cols) view -> (cols, rows) view of the same registers (nothing moves)."""
    return cute.make_tensor(t.iterator, cute.select(t.layout, mode=[1, 0]))


def acc_as_a_operand(frag: cute.Tensor) -> cute.Tensor:
    """A converted accumulator ((2,2), MMA_M, MMA_N) viewed as the A operand ((2,2,2), MMA_M, MMA_N/2) of the
    next m16n8k16 GEMM: two adjacent n8 accumulator atoms are exactly one k16 A atom, so nothing moves."""
    div = cute.logical_divide(frag.layout, (None, None, 2))
    view = cute.make_layout(
        ((div.shape[0], div.shape[2][0]), div.shape[1], div.shape[2][1]),
        stride=((div.stride[0], div.stride[2][0]), div.stride[1], div.stride[2][1]))
    return cute.make_tensor(frag.iterator, view)


def convert(acc: cute.Tensor, dtype) -> cute.Tensor:
    out = cute.make_fragment_like(acc, dtype)
    out.store(acc.load().to(dtype))
    return out


@cute.jit
def gemm_ss(tiled_mma: cute.TiledMma, acc: cute.Tensor,
            copy_a: cute.TiledCopy, s_a: cute.Tensor, r_a: cute.Tensor, r_a_view: cute.Tensor,
            copy_b: cute.TiledCopy, s_b: cute.Tensor, r_b: cute.Tensor, r_b_view: cute.Tensor,
            k_blocks: range | None = None):
    """acc += A.B^T with both operands read from shared memory by ldmatrix, one k-block ahead of the MMA
    (``k_blocks``: see gemm_ss_interleaved)."""
    gemm_ss_interleaved(tiled_mma, ((acc, copy_a, s_a, r_a, r_a_view, copy_b, s_b, r_b, r_b_view),),
                        k_blocks=k_blocks)


def gemm_ss_interleaved(tiled_mma: cute.TiledMma, gemms: tuple, atoms: tuple | None = None,
                        k_blocks: range | None = None):
    """Several independent gemm_ss of one tiled MMA and k extent, interleaved k-block by k-block: each warp
    then has the MMA chains of all of them in flight at once (more independent work between ldmatrix waits
    when a warp's tile has few accumulator chains). ``gemms``: tuples (acc, copy_a, s_a, r_a, r_a_view,
    copy_b, s_b, r_b, r_b_view); ``copy_a`` None means A is already in ``r_a`` for every k-block. Operands are
    read one k-block ahead of the MMA. ``atoms``: the MMA_M atoms of the warp's tile to compute (None: all); the
    others' A reads and MMAs are left out and their accumulator rows keep what they held. ``k_blocks``: the
    k-blocks to take (None: all), the rest being zeros in A or B. Plain Python: it runs at trace time inside a
    kernel."""
    if atoms == ():
        return
    ks = list(k_blocks if k_blocks is not None else range(cute.size(gemms[0][6], mode=[2])))
    for g in gemms:
        _load_k_block(g, ks[0], atoms)
    for i, k in enumerate(ks):
        for g in gemms:
            if i + 1 < len(ks):
                _load_k_block(g, ks[i + 1], atoms)
            acc, _, _, r_a, _, _, _, r_b, _ = g
            if atoms is None:
                cute.gemm(tiled_mma, acc, r_a[None, None, k], r_b[None, None, k], acc)
            for m in atoms or ():
                acc_m = atom_rows(acc, m)  # (V, 1, N): the tiled MMA's (V,M) x (V,N) form
                cute.gemm(tiled_mma, acc_m, _unit_mode(r_a[None, m, k], 1), r_b[None, None, k], acc_m)


def _load_k_block(gemm: tuple, k: int, atoms: tuple | None):
    """ldmatrix k-block ``k`` of one gemm_ss_interleaved operand tuple into its fragments (A only when it is
    not preloaded, and only the ``atoms`` given)."""
    _acc, copy_a, s_a, _r_a, r_a_view, copy_b, s_b, _r_b, r_b_view = gemm
    if copy_a is not None:
        if atoms is None:
            cute.copy(copy_a, s_a[None, None, k], r_a_view[None, None, k])
        for m in atoms or ():
            cute.copy(copy_a, s_a[None, m, k], r_a_view[None, m, k])
    cute.copy(copy_b, s_b[None, None, k], r_b_view[None, None, k])


def atom_rows(t: cute.Tensor, m: int) -> cute.Tensor:
    """MMA_M atom ``m`` of a (V, MMA_M, MMA_N) partition, as a (V, 1, MMA_N) view of the same elements."""
    return _unit_mode(t[None, m, None], 1)


def by_atom(atoms: tuple | None, *ts: cute.Tensor) -> list:
    """The (V, MMA_M, MMA_N) partitions ``ts`` whole ([ts]) when ``atoms`` is None, else one tuple of atom_rows
    views per atom in ``atoms``."""
    return [ts] if atoms is None else [tuple(atom_rows(t, m) for t in ts) for m in atoms]


def _unit_mode(t: cute.Tensor, at: int) -> cute.Tensor:
    """A view of ``t`` with an extent-1 mode inserted before mode ``at``."""
    modes = [t.layout[i] for i in range(cute.rank(t.layout))]
    modes.insert(at, cute.make_layout(1))
    return cute.make_tensor(t.iterator, cute.make_layout(tuple(x.shape for x in modes),
                                                         stride=tuple(x.stride for x in modes)))


@cute.jit
def gemm_rs(tiled_mma: cute.TiledMma, acc: cute.Tensor, r_a: cute.Tensor,
            copy_b: cute.TiledCopy, s_b: cute.Tensor, r_b: cute.Tensor, r_b_view: cute.Tensor,
            atoms: cutlass.Constexpr = None):
    """acc += A.B^T with A already in registers (MMA A layout) and B read from shared memory by ldmatrix
    (``atoms``: see gemm_ss_interleaved)."""
    gemm_ss_interleaved(tiled_mma, ((acc, None, None, r_a, None, copy_b, s_b, r_b, r_b_view),), atoms)


@cute.jit
def gemm_sr(tiled_mma: cute.TiledMma, acc: cute.Tensor,
            copy_a: cute.TiledCopy, s_a: cute.Tensor, r_a: cute.Tensor, r_a_view: cute.Tensor, r_b: cute.Tensor):
    """acc += A.B^T with A read from shared memory by ldmatrix and B held in registers for every k-block (no
    explicit prefetch: the grid kernel runs at the register limit; ptxas schedules the loads)."""
    num_k = cute.size(s_a, mode=[2])
    for k in cutlass.range_constexpr(num_k):
        cute.copy(copy_a, s_a[None, None, k], r_a_view[None, None, k])
        cute.gemm(tiled_mma, acc, r_a[None, None, k], r_b[None, None, k], acc)


@cute.jit
def load_tile_zfill(tiled_copy: cute.TiledCopy, t_src: cute.Tensor, t_dst: cute.Tensor, t_coord: cute.Tensor,
                    row_limit: Int32, col_limit: Int32, async_zfill: cutlass.Constexpr = False):
    """cp.async a partitioned (CPY, CPY_M, CPY_K) tile; chunks outside (row_limit, col_limit) get zeros in shared
    memory instead (cp.async with a false predicate would leave stale data): ``async_zfill`` (TileConfig), by
    cp_async_16_zfill (make_gmem_copy's 16-byte chunks); else a branch between the copy and a store."""
    for m in cutlass.range_constexpr(cute.size(t_src, mode=[1])):
        row_ok = t_coord[0, m, 0][0] < row_limit
        for k in cutlass.range_constexpr(cute.size(t_src, mode=[2])):
            ok = row_ok & (t_coord[0, m, k][1] < col_limit)
            if cutlass.const_expr(async_zfill):
                assert cute.size(t_src, mode=[0]) * t_src.element_type.width == 128, "async_zfill: 16-byte chunks"
                cp_async_16_zfill(t_dst[None, m, k].iterator, t_src[None, m, k].iterator, ok)
            else:
                if ok:
                    cute.copy(tiled_copy, t_src[None, m, k], t_dst[None, m, k])
                else:
                    t_dst[None, m, k].fill(0)


@dsl_user_op
def cp_async_16_zfill(dst: cute.Pointer, src: cute.Pointer, valid, *, loc=None, ip=None) -> None:
    """cp.async.cg of 16 bytes from global ``src`` to shared ``dst``, or 16 zero bytes when ``valid`` is false
    (cp.async's ignore-src predicate: nothing is read, so ``src`` may point past the tensor). One instruction
    where the branch took a copy, a store and three issue slots of padding; the predicate is faster than the
    source-size operand (which ptxas rebuilds from a select)."""
    from cutlass.cute.arch.nvvm_wrappers import _normalize_ptr

    flag = arith.extui(Int32.mlir_type, cutlass.Boolean(valid).ir_value(loc=loc, ip=ip), loc=loc, ip=ip)
    asm = "{\n\t.reg .pred p;\n\tsetp.eq.u32 p, $2, 0;\n\tcp.async.cg.shared.global [$0], [$1], 16, p;\n\t}"
    llvm.inline_asm(None, [dst.toint(loc=loc, ip=ip).ir_value(loc=loc, ip=ip), _normalize_ptr(src, loc=loc, ip=ip),
                           flag], asm, "r,l,r,~{memory}", has_side_effects=True, asm_dialect=llvm.AsmDialect.AD_ATT,
                    loc=loc, ip=ip)


def gmem_copy_threads_per_row(cols: int, elem_bits: int = 16) -> int:
    """Threads along a row in make_gmem_copy's thread layout: one per 16-byte chunk of a swizzle-atom row."""
    return swizzle_atom_cols(cols) // (128 // elem_bits)


def copy_threads(num_threads: int, rows: int, cols: int) -> int:
    """Threads that take part in a 16-bit make_gmem_copy of a (rows, cols) tile: its thread layout is (threads /
    chunks, chunks) with ``chunks`` 16-byte chunks per swizzle-atom row, so more than rows x chunks threads would
    reach past the tile (80 columns: 16-column atoms, 2 chunks, so a 64-row tile takes 128 threads)."""
    return min(num_threads, rows * gmem_copy_threads_per_row(cols))


@cute.jit
def load_tile_zfill_by(n_threads: cutlass.Constexpr, all_threads: cutlass.Constexpr, tidx, tiled_copy: cute.TiledCopy,
                       t_src: cute.Tensor, t_dst: cute.Tensor, t_coord: cute.Tensor, row_limit: Int32,
                       col_limit: Int32, async_zfill: cutlass.Constexpr = False):
    """load_tile_zfill by the first ``n_threads`` threads of the CTA (all of them when that is every thread)."""
    if cutlass.const_expr(n_threads < all_threads):
        if tidx < n_threads:
            load_tile_zfill(tiled_copy, t_src, t_dst, t_coord, row_limit, col_limit, async_zfill)
    else:
        load_tile_zfill(tiled_copy, t_src, t_dst, t_coord, row_limit, col_limit, async_zfill)


def make_gmem_copy(dtype, num_threads: int, cols: int, async_copy: bool = True) -> cute.TiledCopy:
    """128-bit per thread tiled copy for (rows, cols) tiles with cols contiguous."""
    elems = 128 // dtype.width
    op = cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.cpasync.LoadCacheMode.GLOBAL) if async_copy \
        else cute.nvgpu.CopyUniversalOp()
    atom = cute.make_copy_atom(op, dtype, num_bits_per_copy=128)
    tpr = gmem_copy_threads_per_row(cols, dtype.width)
    thr = cute.make_layout((num_threads // tpr, tpr), stride=(tpr, 1))
    return cute.make_tiled_copy_tv(atom, thr, cute.make_layout((1, elems)))


def acc_pairs(acc: cute.Tensor):
    """Trace time: the (pair, row atom, column atom) coordinates of an fp32 mma.sync accumulator ((2,2), MMA_M,
    MMA_N), one per two adjacent columns (8 bytes: one vector access)."""
    return [((None, v), i, j) for i in range(cute.size(acc, mode=[1])) for j in range(cute.size(acc, mode=[2]))
            for v in range(2)]


def red_add_acc(g: cute.Tensor, acc: cute.Tensor):
    """Atomically add an fp32 accumulator into its global partition ``g``: two adjacent columns per
    red.global.add.v2.f32 (red_add_acc_v4: four)."""
    for crd in acc_pairs(acc):  # trace-time unrolled
        cute.arch.red(g[crd].iterator, acc[crd].load(), op="add", dtype=cutlass.Float32, sem="relaxed", scope="gpu")


def red_add_acc_v4(g: cute.Tensor, acc: cute.Tensor):
    """red_add_acc with 16-byte adds: column atoms j and j + 1 (j even) of each row atom and row half go out
    together. A lane holds two adjacent columns of each atom and its pair partner (lane ^ 1) the next two, so the
    even lane adds atom j's four columns (its own two, then its partner's) and the odd lane atom j + 1's (its
    partner's, then its own). Where the two atoms lie in one 128-byte line (TileConfig.dq_red_v4), that halves the
    reduction instructions and the L1 wavefronts they take."""
    n = cute.size(acc, mode=[2])
    assert n % 2 == 0, "red_add_acc_v4: an even number of column atoms"
    for i in range(cute.size(acc, mode=[1])):
        for j in range(0, n, 2):
            for v in range(2):
                a, b = ((None, v), i, j), ((None, v), i, j + 1)
                red_add_pair_v4(g[a].iterator, g[b].iterator, acc[a][0], acc[a][1], acc[b][0], acc[b][1])


@dsl_user_op
def red_add_pair_v4(pa: cute.Pointer, pb: cute.Pointer, a0: Float32, a1: Float32, b0: Float32, b1: Float32, *,
                    loc=None, ip=None) -> None:
    """One lane pair's red.global.add.v4.f32 of two column atoms (see red_add_acc_v4): ``pa`` / ``pb`` point at this
    lane's two columns of atom j / j + 1; the odd lane's four columns start two before its own in atom j + 1."""
    from cutlass.cute.arch.nvvm_wrappers import _normalize_ptr

    body = ("mov.u32 l, %laneid;\n\tand.b32 l, l, 1;\n\tsetp.ne.u32 odd, l, 0;\n\t"
            "selp.f32 s0, $2, $4, odd;\n\tselp.f32 s1, $3, $5, odd;\n\t"
            "shfl.sync.bfly.b32 r0, s0, 1, 0x1f, 0xffffffff;\n\tshfl.sync.bfly.b32 r1, s1, 1, 0x1f, 0xffffffff;\n\t"
            "selp.f32 x0, r0, $2, odd;\n\tselp.f32 x1, r1, $3, odd;\n\t"
            "selp.f32 x2, $4, r0, odd;\n\tselp.f32 x3, $5, r1, odd;\n\t"
            "sub.s64 q, $1, 8;\n\tselp.b64 q, q, $0, odd;\n\t"
            "red.relaxed.gpu.global.add.v4.f32 [q], {x0, x1, x2, x3};\n\t")
    operands = [_normalize_ptr(pa, loc=loc, ip=ip), _normalize_ptr(pb, loc=loc, ip=ip)]
    operands += [Float32(x).ir_value(loc=loc, ip=ip) for x in (a0, a1, b0, b1)]
    llvm.inline_asm(None, operands, "{\n\t.reg .pred odd;\n\t.reg .b32 l;\n\t.reg .f32 s0, s1, r0, r1, x0, x1, x2, x3;"
                    "\n\t.reg .b64 q;\n\t" + body + "}", "l,l,f,f,f,f,~{memory}",
                    has_side_effects=True, asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)


def store_acc_global(g: cute.Tensor, acc: cute.Tensor):
    """Store an fp32 accumulator into its global partition ``g``, two adjacent columns per store."""
    for crd in acc_pairs(acc):  # trace-time unrolled
        g[crd].store(acc[crd].load())


def add_from_global(acc: cute.Tensor, g: cute.Tensor):
    """acc += its global partition ``g`` (fp32), two adjacent columns per load."""
    for crd in acc_pairs(acc):  # trace-time unrolled
        acc[crd].store(acc[crd].load() + g[crd].load())


@cute.jit
def store_acc(acc: cute.Tensor, g: cute.Tensor, coords: cute.Tensor, row_limit: Int32, col_limit: Int32,
              scale: Float32 | None = None, zero_from_row: Int32 | None = None):
    """g = acc (already in g's dtype), or with ``scale`` g = scale * acc converted to g's dtype: two adjacent
    columns per store, pairs past (row_limit, col_limit) skipped. ``coords``: the (row, column) of each element (a
    partition of an identity tensor like ``g``). ``zero_from_row``: rows from it on are stored as zeros, whatever
    the accumulator holds (padding: selected, not multiplied, so a NaN there goes nowhere)."""
    pairs = acc_pairs(acc)
    for k in cutlass.range_constexpr(len(pairs)):
        crd = pairs[k]
        rc = coords[(0, crd[0][1]), crd[1], crd[2]]
        if (rc[0] < row_limit) & (rc[1] < col_limit):
            if cutlass.const_expr(scale is None):
                val = acc[crd].load()
            else:
                val = (acc[crd].load() * scale).to(g.element_type)
            if cutlass.const_expr(zero_from_row is None):
                g[crd].store(val)
            else:
                if rc[0] < zero_from_row:
                    g[crd].store(val)
                else:
                    g[crd].store(cute.zeros_like(val))


@dsl_user_op
def unsigned_le(a: Int32, b: Int32, *, loc=None, ip=None) -> cutlass.Boolean:
    """a <= b with both int32 values read as unsigned (one ISETP.LE.U32; the DSL compares Int32 signed even when
    cast to Uint32)."""
    return cutlass.Boolean(arith.cmpi(arith.CmpIPredicate.ule, Int32(a).ir_value(loc=loc, ip=ip),
                                      Int32(b).ir_value(loc=loc, ip=ip), loc=loc, ip=ip))


@dsl_user_op
def load_relaxed(ptr: cute.Pointer, *, loc=None, ip=None) -> Int32:
    """The int32 at global ``ptr``, read at L2 (ld.relaxed.gpu: a strong load with no L1 invalidate, so issuing it
    early stalls nothing; an acquire made of it needs a later fence.acquire: spin_until_at_least's ``seen``)."""
    from cutlass.cute.arch.nvvm_wrappers import _normalize_ptr

    return Int32(llvm.inline_asm(
        Int32.mlir_type, [_normalize_ptr(ptr, loc=loc, ip=ip)], "ld.relaxed.gpu.global.b32 $0, [$1];",
        "=r,l,~{memory}", has_side_effects=True, asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


@dsl_user_op
def spin_until_at_least(ptr: cute.Pointer, value: Int32, seen: Int32 | None = None, *, loc=None, ip=None) -> None:
    """Busy-wait (one thread) until the int32 counter at global ``ptr`` reaches ``value``, with acquire semantics:
    a spin on ld.acquire.gpu. ``seen``: the counter as an earlier load_relaxed read it; when that already reached
    ``value``, the wait is a fence.acquire alone (CCTL.IVALL in SASS; the relaxed read and the fence make an acquire
    pattern of the PTX memory model). Not "equals": other waiters may already have moved the counter past
    ``value``. One asm block, so the compiler sees no loop around it (a visible loop there costs the main kernel
    ~20 registers)."""
    from cutlass.cute.arch.nvvm_wrappers import _normalize_ptr

    spin = ("FROST_SPIN_${:uid}:\n\t"
            "ld.acquire.gpu.global.b32 v, [$0];\n\tsetp.lt.s32 p, v, $1;\n\t@p bra FROST_SPIN_${:uid};\n\t")
    operands = [_normalize_ptr(ptr, loc=loc, ip=ip), Int32(value).ir_value(loc=loc, ip=ip)]
    if seen is None:
        body, constraints = spin, "l,r,~{memory}"
    else:
        operands.append(Int32(seen).ir_value(loc=loc, ip=ip))
        body = ("setp.ge.s32 p, $2, $1;\n\t@p bra FROST_SEEN_${:uid};\n\t" + spin
                + "bra.uni FROST_DONE_${:uid};\n\tFROST_SEEN_${:uid}:\n\tfence.acquire.gpu;\n\tFROST_DONE_${:uid}:\n\t")
        constraints = "l,r,r,~{memory}"
    llvm.inline_asm(None, operands, "{\n\t.reg .pred p;\n\t.reg .b32 v;\n\t" + body + "}", constraints,
                    has_side_effects=True, asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)


def _asm_move(x, numeric, reg: str, loc, ip):
    """``x`` (an Int32 or Int64 value) through a ``mov`` in an asm statement with side effects."""
    return numeric(llvm.inline_asm(numeric.mlir_type, [numeric(x).ir_value(loc=loc, ip=ip)],
                                   f"mov.b{numeric.width} $0, $1;", f"={reg},{reg}", has_side_effects=True,
                                   asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip))


@dsl_user_op
def opaque_i32(x: Int32, *, loc=None, ip=None) -> Int32:
    """``x`` through an asm statement with side effects: the compilers cannot merge it with an earlier copy of the
    same value, so what is recomputed from it after a loop is not held in registers across the loop."""
    return _asm_move(x, Int32, "r", loc, ip)


@dsl_user_op
def opaque_i64(x: Int64, *, loc=None, ip=None) -> Int64:
    """opaque_i32 for a 64-bit value."""
    return _asm_move(x, Int64, "l", loc, ip)
