"""The main kernel's setup and loads (a base of bwd_main.BwdMainKernel): its global and shared-memory views, the
loaders of the Q/dO side and the MMA operands, and the cp.async loads of a query tile's Q, LSE, delta and dO."""

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32
from cutlass.cute.nvgpu import cpasync, warp

from frost.kernels import cute_utils as cutil
from frost.kernels.mask import FLAG_ORDERED_DQ, FLAG_SEQ_KV, FLAG_SEQ_Q, batch_length, make_mask
from frost.kernels.backward.ordering import kv_tile_of_block


class MainSetup:
    """Setup helpers and loads of BwdMainKernel (its attributes: tile, dtype, N, M, D, DV, ...)."""

    @cute.jit
    def _setup(self, a, s, tidx):
        """This CTA's batch lengths, mask, KV-side tiles, loaders and walk: the query tiles [m_begin, m_end) from
        the last down, each for every query head of the GQA group in head order (dK/dV sum over the group in
        registers, in a fixed order; see dq_order_wait for why the walk runs downwards)."""
        ordered = True if self.ordered else self._ordered_at_run_time(a.flags)
        n_block, head_kv, batch = kv_tile_of_block(a.flags)
        seqlen_q = batch_length(a.SeqQ, a.flags, FLAG_SEQ_Q, batch, a.Q.shape[2])
        seqlen_kv = batch_length(a.SeqKV, a.flags, FLAG_SEQ_KV, batch, a.K.shape[2])
        mask = make_mask(seqlen_q, seqlen_kv, a.bounds, a.flags)
        g = self._gmem_views(a.Q, a.K, a.V, a.dK, a.dV, batch, head_kv, n_block)
        q_side = SimpleNamespace(Q=a.Q, dO=a.dO, LSE2=a.LSE2, Delta=a.Delta, dQacc=a.dQacc, dQ=a.dQ, Sem=a.Sem,
                                 batch=batch, dq_scale=a.scale)
        ld = self._loaders(g, s, q_side, tidx, a.Q.shape[3], a.V.shape[3], seqlen_q)
        m_begin, m_end = mask.m_block_range(n_block, self.N, self.M)
        n_m = cutlass.max(m_end - m_begin, 0)
        walk = SimpleNamespace(m_first=m_end - 1, m_last=m_begin, n_m=n_m, n_iter=n_m * a.group,
                               head0=head_kv * a.group, group=a.group, n_block=n_block, ordered=ordered)
        return mask, g, ld, walk

    @cute.jit
    def _ordered_at_run_time(self, flags):
        """Whether an atomic set's problem orders dQ (never: the Launch sends ordered problems to the ordered set;
        the path stays compiled, see __init__)."""
        return (flags & FLAG_ORDERED_DQ) != 0

    @cute.jit
    def _gmem_views(self, mQ, mK, mV, mdK, mdV, batch, head_kv, n_block):
        """The CTA's fixed KV-side tiles; the query side is sliced per (head, tile) by the loaders. V-side tiles
        are DV wide (the same objects as the K side's coordinates when DV == D)."""
        N, M, D, DV = self.N, self.M, self.D, self.DV
        k_bh, v_bh = mK[batch, head_kv, None, None], mV[batch, head_kv, None, None]
        q_shape = mQ[batch, 0, None, None].shape
        g = SimpleNamespace(
            cQ=cute.local_tile(cute.make_identity_tensor(q_shape), (M, D), (None, 0)),
            gK=cute.local_tile(k_bh, (N, D), (n_block, 0)),
            cK=cute.local_tile(cute.make_identity_tensor(k_bh.shape), (N, D), (n_block, 0)),
            gV=cute.local_tile(v_bh, (N, DV), (n_block, 0)),
            cV=cute.local_tile(cute.make_identity_tensor(v_bh.shape), (N, DV), (n_block, 0)),
            gdK=cute.local_tile(mdK[batch, head_kv, None, None], (N, D), (n_block, 0)),
            gdV=cute.local_tile(mdV[batch, head_kv, None, None], (N, DV), (n_block, 0)),
            cdKV=cute.local_tile(cute.make_identity_tensor(k_bh.shape), (N, D), (n_block, 0)))
        g.cdV, g.cdO = g.cdKV, g.cQ
        if cutlass.const_expr(DV != D):
            g.cdV = cute.local_tile(cute.make_identity_tensor(v_bh.shape), (N, DV), (n_block, 0))
            g.cdO = cute.local_tile(cute.make_identity_tensor(q_shape), (M, DV), (None, 0))
        return g

    @cute.jit
    def _smem_tensors(self, smem: cutlass.Constexpr, storage_cls: cutlass.Constexpr):
        st = cutlass.memory.SmemAllocator().allocate(storage_cls)
        sdSt = st.sdSt.get_tensor(smem.dSt)
        # LSE/delta broadcast along the key rows of S^T: (N, M, stages) with stride 0 on the keys
        s = self._q_side_smem(st, smem, cute.make_layout((self.N, self.M, self.tile.q_stages),
                                                         stride=(0, 1, self.M)))
        s.V, s.dSt, s.dS = st.sV.get_tensor(smem.V), sdSt, cutil.transpose_view(sdSt, self.N, self.M)
        return s

    def _q_side_smem(self, st, smem, vec_b, sdO=None):
        """The tensors every main kernel shares: K, Q, dO (and their transposed views), LSE * log2(e) and delta
        (plain and broadcast through ``vec_b`` onto the score tile). ``sdO``: dO's tensor where it is not the
        storage's own sdO field (bwd_main_lag)."""
        t, N, M, D = self.tile, self.N, self.M, self.D
        sQ, sK = st.sQ.get_tensor(smem.Q), st.sK.get_tensor(smem.K)
        sdO = st.sdO.get_tensor(smem.dO) if sdO is None else sdO
        return SimpleNamespace(
            Q=sQ, dO=sdO, K=sK,
            LSE2=st.sLSE2.get_tensor(cute.make_layout((M, t.q_stages))),
            Delta=st.sDelta.get_tensor(cute.make_layout((M, t.q_stages))),
            LSE2_b=st.sLSE2.get_tensor(vec_b), Delta_b=st.sDelta.get_tensor(vec_b),
            Qt=cutil.transpose_view(sQ, M, D, t.q_stages), dOt=cutil.transpose_view(sdO, M, self.DV, t.do_stages),
            Kt=cutil.transpose_view(sK, N, D))

    @cute.jit
    def _loaders(self, g, s, q_side, tidx, head_dim, head_dim_v, seqlen_q):
        copies = {}   # one tiled copy (and thread slice) per distinct (threads, cols)
        copy, thr = self._gmem_copy(copies, tidx, self.num_threads, self.D)        # K
        copy_v, thr_v = self._gmem_copy(copies, tidx, self.num_threads, self.DV)   # V
        copy_q, thr_q = self._gmem_copy(copies, tidx, self.q_threads, self.D)      # Q (M rows: maybe fewer threads)
        copy_do, thr_do = self._gmem_copy(copies, tidx, self.do_threads, self.DV)  # dO
        vec_atom = cute.make_copy_atom(cpasync.CopyG2SOp(), Float32, num_bits_per_copy=128)
        vec_copy = cute.make_tiled_copy_tv(vec_atom, cute.make_layout(self.M // 4), cute.make_layout(4))
        vthr = vec_copy.get_slice(tidx % (self.M // 4))
        return SimpleNamespace(
            copy=copy, copy_v=copy_v, copy_q=copy_q, thr_q=thr_q, copy_do=copy_do, thr_do=thr_do,
            vec_copy=vec_copy, vthr=vthr, tidx=tidx,
            head_dim=head_dim,
            head_dim_v=head_dim_v, seqlen_q=seqlen_q, qQ=q_side.Q, qdO=q_side.dO, qLSE2=q_side.LSE2,
            qDelta=q_side.Delta, qdQacc=q_side.dQacc, qdQ=q_side.dQ, dq_scale=q_side.dq_scale, qSem=q_side.Sem,
            batch=q_side.batch,
            **self._lean_bases(q_side),
            tQsQ=thr_q.partition_D(s.Q), tQcQ=thr_q.partition_S(g.cQ), tdOsdO=thr_do.partition_D(s.dO),
            tdOcdO=thr_do.partition_S(g.cdO),
            tKgK=thr.partition_S(g.gK), tKsK=thr.partition_D(s.K), tKcK=thr.partition_S(g.cK),
            tVgV=thr_v.partition_S(g.gV), tVsV=thr_v.partition_D(s.V), tVcV=thr_v.partition_S(g.cV),
            tLsL=vthr.partition_D(s.LSE2), tDsD=vthr.partition_D(s.Delta))

    def _lean_bases(self, q_side) -> dict:
        """TileConfig.lean_refill: the batch's query-side tensors (H, S, ...) that _q_side_src and _load_q take
        their tiles from (None at level 0); at level 2 each on a base pointer made here, once per pass, through an
        asm move (so that it is held, in uniform registers, instead of rebuilt from the batch stride every step)."""
        if not self.tile.lean_refill:
            return dict(qQb=None, qdOb=None, qLSE2b=None, qDeltab=None)
        b = q_side.batch

        def based(t: cute.Tensor):
            if cutlass.const_expr(self.tile.lean_refill < 2):
                return t
            base = cute.make_ptr(t.element_type, cutil.opaque_i64(t.iterator.toint()), cute.AddressSpace.gmem,
                                 assumed_align=16)
            return cute.make_tensor(base, t.layout)

        return dict(qQb=based(q_side.Q[b, None, None, None]), qdOb=based(q_side.dO[b, None, None, None]),
                    qLSE2b=based(q_side.LSE2[b, None, None]), qDeltab=based(q_side.Delta[b, None, None]))

    def _gmem_copy(self, copies: dict, tidx, threads: int, cols: int):
        """(tiled copy, this thread's slice) of a (rows, cols) tile loaded by the first ``threads`` threads,
        made once per (threads, cols) in ``copies``. Plain Python: it runs at trace time."""
        if (threads, cols) not in copies:
            c = cutil.make_gmem_copy(self.dtype, threads, cols)
            copies[threads, cols] = c, c.get_slice(tidx if threads == self.num_threads else tidx % threads)
        return copies[threads, cols]

    @cute.jit
    def _mma_operands(self, mmas: cutlass.Constexpr, s, tidx):
        kv, dq = mmas.kv, mmas.dq
        ldsm = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=False, num_matrices=4), self.dtype)
        ldsm_t = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=4), self.dtype)
        thr_kv, thr_dq = kv.get_slice(tidx), dq.get_slice(tidx)
        cA = cute.make_tiled_copy_A(ldsm, kv).get_slice(tidx)
        cB = cute.make_tiled_copy_B(ldsm, kv).get_slice(tidx)
        cBt = cute.make_tiled_copy_B(ldsm_t, kv).get_slice(tidx)
        cAq = cute.make_tiled_copy_A(ldsm_t, dq).get_slice(tidx)
        # K^T, 16 or 8 columns per warp and MMA step (tiles.dq_col_step): ldmatrix.x4 or .x2
        ldsm_kt = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=self.tile.dq_col_step // 4),
                                      self.dtype)
        cBq = cute.make_tiled_copy_B(ldsm_kt, dq).get_slice(tidx)
        rK = thr_kv.make_fragment_A(thr_kv.partition_A(s.K))
        rV = thr_kv.make_fragment_A(thr_kv.partition_A(s.V))
        rQ = thr_kv.make_fragment_B(thr_kv.partition_B(s.Q[None, None, 0]))
        rdO = thr_kv.make_fragment_B(thr_kv.partition_B(s.dO[None, None, 0]))
        rQt = thr_kv.make_fragment_B(thr_kv.partition_B(s.Qt[None, None, 0]))
        rdOt = thr_kv.make_fragment_B(thr_kv.partition_B(s.dOt[None, None, 0]))
        rdS = thr_dq.make_fragment_A(thr_dq.partition_A(cutil.first_stage(s.dS)))
        kt_chunk = cute.local_tile(s.Kt, (self.tile.dq_chunk, self.N), (0, 0))
        rKt = thr_dq.make_fragment_B(thr_dq.partition_B(kt_chunk))
        cS = cute.make_identity_tensor((self.N, self.M))
        dS_store = cute.make_tiled_copy_C(
            cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.dtype, num_bits_per_copy=32), kv).get_slice(tidx)
        return SimpleNamespace(
            kv=kv, dq=dq, thr_kv=thr_kv, thr_acc=thr_kv, thr_dq=thr_dq, cA=cA, cB=cB, cBt=cBt, cAq=cAq, cBq=cBq,
            **cutil.ldsm_operands({"K": (cA, rK, s.K), "V": (cA, rV, s.V), "Q": (cB, rQ, s.Q), "dO": (cB, rdO, s.dO),
                                "Qt": (cBt, rQt, s.Qt), "dOt": (cBt, rdOt, s.dOt), "dS": (cAq, rdS, s.dS)}),
            rKt=rKt, rKt_v=cBq.retile(rKt), sKt=s.Kt,
            dS_store=dS_store, sdSt_dst=dS_store.partition_D(s.dSt),
            cS=thr_kv.partition_C(cS),
            sLSE2=s.LSE2_b, sDelta=s.Delta_b)

    def _make_acc(self, mm, do_dv, do_dk):
        shape = mm.thr_acc.partition_shape_C((self.N, self.D))
        acc = SimpleNamespace(dV=None, dK=None)
        if do_dv:
            acc.dV = cute.make_rmem_tensor(mm.thr_acc.partition_shape_C((self.N, self.DV)), Float32)
            acc.dV.fill(0.0)
        if do_dk:
            acc.dK = cute.make_rmem_tensor(shape, Float32)
            acc.dK.fill(0.0)
        return acc

    # ------------------------------------------------------------------------------------------------ loads
    @cute.jit
    def _q_tile(self, t: cute.Tensor, ld, head, m_block, cols: cutlass.Constexpr = 0):
        """The (M, cols) tile ``m_block`` (cols: D by default) of query-side tensor ``t`` (B, H, S, D) for this
        batch and ``head``."""
        return cute.local_tile(t[ld.batch, head, None, None], (self.M, cols or self.D), (m_block, 0))

    @cute.jit
    def _load_q(self, ld, head, m_block, stage, with_delta: cutlass.Constexpr):
        cutil.load_tile_zfill_by(self.q_threads, self.num_threads, ld.tidx, ld.copy_q,
                              self._q_side_src(ld, ld.thr_q, ld.qQ, ld.qQb, head, m_block, self.D),
                              ld.tQsQ[None, None, None, stage], ld.tQcQ[None, None, None, m_block], ld.seqlen_q,
                              ld.head_dim, self.tile.async_zfill)
        # (no helper call taking ``ld`` inside the runtime branch: the tracer would thread all of ld through it)
        vec_copy = ld.vec_copy
        if cutlass.const_expr(self.tile.lean_refill):
            vec_offset = self._step_offset(ld.qLSE2b, head, m_block)  # (LSE2 and Delta share their layout)
            lse_src = ld.vthr.partition_S(self._step_tile(ld.qLSE2b, vec_offset))
            delta_src = ld.vthr.partition_S(self._step_tile(ld.qDeltab, vec_offset))
        else:
            lse_src = ld.vthr.partition_S(self._row_vec(ld.qLSE2, ld, head, m_block))
            delta_src = ld.vthr.partition_S(self._row_vec(ld.qDelta, ld, head, m_block))
        lse_dst, delta_dst = ld.tLsL[None, None, stage], ld.tDsD[None, None, stage]
        if ld.tidx < self.M // 4:
            cute.copy(vec_copy, lse_src, lse_dst)
            if cutlass.const_expr(with_delta):
                cute.copy(vec_copy, delta_src, delta_dst)

    def _q_side_src(self, ld, thr, t: cute.Tensor, t_batch, head, m_block, cols: int):
        """This thread's partition (``thr``) of the (M, cols) tile ``m_block`` of ``head`` of query-side tensor
        ``t`` (B, H, S, D), for a refill; with TileConfig.lean_refill through _step_tile, from ``t_batch``
        (_lean_bases: the batch's (H, S, D) view of ``t``)."""
        if self.tile.lean_refill:
            return thr.partition_S(self._step_tile(t_batch, self._step_offset(t_batch, head, m_block), cols))
        return thr.partition_S(self._q_tile(t, ld, head, m_block, cols))

    def _step_offset(self, whole: cute.Tensor, head, m_block):
        """The offset of query tile ``m_block`` of ``head`` in ``whole`` (the batch's (H, S, ...) query-side
        tensor). It goes through an asm move so that the compilers keep it CTA-uniform: otherwise they fold each
        thread's offset into its products and rebuild all of them in 64-bit vector arithmetic every step."""
        crd = (head, m_block * self.M) + (0,) * (cute.rank(whole) - 2)
        return cute.assume(cutil.opaque_i64(cute.crd2idx(crd, whole.layout)), divby=128 // whole.element_type.width)

    def _step_tile(self, whole: cute.Tensor, offset, cols: int = 0):
        """The (M, cols) (or (M,)) tile of ``whole`` at ``offset`` (_step_offset). Its row stride is 32-bit, so
        that each thread's partition offsets are 32-bit arithmetic (api's stride check keeps M rows' span within
        2**31 elements)."""
        if cutlass.const_expr(cute.rank(whole) == 2):
            layout = cute.make_layout(self.M)
        else:
            row_stride = cute.assume(Int32(whole.layout.stride[1]), divby=128 // whole.element_type.width)
            layout = cute.make_layout((self.M, cols), stride=(row_stride, 1))
        return cute.make_tensor(whole.iterator + offset, layout)

    @cute.jit
    def _row_vec(self, t: cute.Tensor, ld, head, m_block):
        """The (M,) tile ``m_block`` of a per-row fp32 workspace vector (B, H, S_pad) for this batch and head."""
        return cute.local_tile(t[ld.batch, head, None], (self.M,), (m_block,))

    @cute.jit
    def _load_do(self, ld, head, m_block, stage):
        cutil.load_tile_zfill_by(self.do_threads, self.num_threads, ld.tidx, ld.copy_do,
                              self._q_side_src(ld, ld.thr_do, ld.qdO, ld.qdOb, head, m_block, self.DV),
                              ld.tdOsdO[None, None, None, stage], ld.tdOcdO[None, None, None, m_block], ld.seqlen_q,
                              ld.head_dim_v, self.tile.async_zfill)
