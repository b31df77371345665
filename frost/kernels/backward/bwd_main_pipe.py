"""bwd_main_lag with its one CTA barrier per step replaced by per-stage mbarriers, so that warps need not meet
every step (both dQ orders).

The lagged step's remaining top barrier makes its warps wait for each other at the same point every step. Here
each shared buffer gets a "full" and an "empty" mbarrier and a warp waits only for what it reads next:
- Q/dO/LSE/delta stage s: full[s] completes when every thread's cp.async of the step landed (each thread arrives
  through cp.async.mbarrier.arrive.noinc: count = threads); empty[s] when every thread is past its last read of the
  stage (after dK), which the loads of the step two ahead wait for.
- dS^T buffer b: dsfull[b] when every thread stored its part (the lagged dQ GEMM waits for it), dsempty[b] when every
  thread's dQ GEMM read it (the store two steps later waits for it).
The other arrivals come from every thread (count = threads), each releasing its own shared-memory accesses:
arriving from one lane per warp after a __syncwarp would be fewer arrivals, but compute-sanitizer's racecheck does
not credit the __syncwarp and reports the other lanes' reads as hazards. The k-th completion of a
barrier is waited for with parity k & 1; no thread can get two completions ahead on any barrier (each wait chains
to the others' arrivals of the completion before). Rows past the query length are zero-filled with st.shared
before the thread's noinc arrive (racecheck finds that ordered, and those rows only ever meet zero probabilities).

Q/dO stages: tile.q_stages (= do_stages), 2 or 3; with three, a trip issues the loads of the step two ahead, so a
load has two steps to land and warps may drift further apart; the two dS^T buffers stay two.

Ordered dQ (the ordered sets at d96 and d128): the lagged adds keep their semaphore order, so dQ is bitwise equal
to the barrier steps' ordered sets. In place of the barrier that put every warp's adds of step i before its release,
every thread arrives on an ADDS_DONE mbarrier after its adds, and the releasing warp waits for that before its
lane's red.release (the arrive's release and the wait's acquire order every thread's adds before the cumulative
release). The release goes after trip i + 2's GEMMs (TileConfig.release_late: its fence does not wait behind the
adds of step i + 1 just issued), the warps taking turns (TileConfig.release_rotate: warp i % warps releases step
i, so no one warp stalls on the fence every step while the others wait for it at the stage barriers).

dK and dV are bitwise equal to bwd_main_lag's. A trip issues its loads at its top (later in the step they land
too late)."""

import cutlass
import cutlass.cute as cute

from frost.kernels.backward.bwd_main_lag import BwdMainLagKernel
from frost.kernels.backward.tiles import pipe_mbarriers


class BwdMainPipeKernel(BwdMainLagKernel):
    def __init__(self, dtype, tile, arch, ordered: bool = False, varlen: bool = False):
        super().__init__(dtype, tile, arch, ordered, varlen)
        S = tile.q_stages  # mbarrier index of stage / buffer 0 of each kind (the others follow)
        self.FULL, self.EMPTY, self.DS_FULL, self.DS_EMPTY = 0, S, 2 * S, 2 * S + 2
        self.ADDS_DONE = pipe_mbarriers(S)  # ordered dQ: two more after those, every thread's adds of a step issued
        self.mbarriers = pipe_mbarriers(S, ordered)

    @cute.jit
    def _setup(self, a, s, tidx):
        # (a named base: inside a jit function zero-argument super() resolves against the instance's own class, so
        # a subclass's override calling this one would recurse)
        mask, g, ld, walk = BwdMainLagKernel._setup(self, a, s, tidx)
        walk.mbar = s.mbar
        return mask, g, ld, walk

    def _bar(self, walk, kind: int, i, n: int = 2):
        """The mbarrier of ``kind`` for stage / buffer ``i % n``."""
        return walk.mbar + kind + i % n

    def _phase(self, i, n: int = 2):
        """Parity of the completion of the ``i % n`` barrier of a kind that belongs to step / use ``i``."""
        return (i // n) % 2

    def _stage_bar(self, walk, kind: int, step):
        return self._bar(walk, kind, step, self.tile.q_stages)

    def _stage_phase(self, step):
        return self._phase(step, self.tile.q_stages)

    @cute.jit
    def _init_sync(self, walk):
        """Every mbarrier (pipe_mbarriers), before the walk's first CTA barrier (which orders them before any
        use)."""
        if cute.arch.thread_idx()[0] == 0:
            for k in cutlass.range_constexpr(self.mbarriers):
                cute.arch.mbarrier_init(walk.mbar + k, self.num_threads)
        cute.arch.mbarrier_init_fence()

    @cute.jit
    def _trip_sync(self, walk, it):
        if it < walk.n_iter:
            cute.arch.mbarrier_wait(self._stage_bar(walk, self.FULL, it), self._stage_phase(it))

    @cute.jit
    def _before_loads(self, walk, step):
        S = self.tile.q_stages
        if (step < walk.n_iter) & (step >= S):  # the stage's use S steps back is over
            cute.arch.mbarrier_wait(self._stage_bar(walk, self.EMPTY, step), self._stage_phase(step - S))

    @cute.jit
    def _after_loads(self, walk, step):
        cute.arch.cp_async_mbarrier_arrive_noinc(self._stage_bar(walk, self.FULL, step))

    @cute.jit
    def _before_ds_store(self, walk, it):
        if it >= 2:
            cute.arch.mbarrier_wait(self._bar(walk, self.DS_EMPTY, it), self._phase(it - 2))

    @cute.jit
    def _after_ds_store(self, walk, it):
        cute.arch.mbarrier_arrive(self._bar(walk, self.DS_FULL, it))

    @cute.jit
    def _after_step_reads(self, walk, it):
        cute.arch.mbarrier_arrive(self._stage_bar(walk, self.EMPTY, it))

    @cute.jit
    def _before_ds_reads(self, walk, step):
        cute.arch.mbarrier_wait(self._bar(walk, self.DS_FULL, step), self._phase(step))

    @cute.jit
    def _after_ds_reads(self, walk, step):
        cute.arch.mbarrier_arrive(self._bar(walk, self.DS_EMPTY, step))

    # ordered dQ: step i's release waits until every thread issued its adds of step i (bwd_main_lag: the barrier)
    @cute.jit
    def _after_dq_adds(self, walk, step):
        if cutlass.const_expr(self.ordered):
            cute.arch.mbarrier_arrive(self._bar(walk, self.ADDS_DONE, step))

    @cute.jit
    def _before_release(self, walk, step):
        """(the releasing warp, whose elected lane releases: the arrive's release and this wait's acquire put every
        thread's adds before the release, which is cumulative)"""
        if cute.arch.make_warp_uniform(cute.arch.warp_idx()) == self._release_warp(step):
            cute.arch.mbarrier_wait(self._bar(walk, self.ADDS_DONE, step), self._phase(step))
