"""Hold every SM of a bigger GPU down to SM120's shared memory while a peer's kernels are timed.

frost's kernels emulate SM120's occupancy themselves (kernels/arch.py, launch_smem_bytes). A peer's kernels do not:
on an H200 (228 KB of shared memory per SM) FA4's SM120 d128 forward tile (64 KB) fits two or three CTAs on an SM
where SM120 (100 KB) fits one. ``SmemHold`` levels that: one resident CTA per SM of a kernel that does nothing but
hold ``smem_per_sm - 100 KB - 1 KB`` of shared memory (its own 1 KB reservation included, what is left is exactly
SM120's 100 KB), sleeping until the host releases it. Kernels launched meanwhile get what an SM120 SM would give
them. Only the timed calls run under a hold, and they must not wait on the whole device (a device-wide
synchronize would wait for the holder): the holder also quits by itself after ``max_seconds``, and a hold that
ended that way is reported as broken, never timed as if it held.

frost's own backend never runs under a hold: its launches request the shared memory of its SM120 occupancy, which
the held SMs no longer have. This module imports cutlass; the bench loads it only when asked to hold.

Not working yet: on an H100 one holder CTA sits on each of the 132 SMs and stays there, and then no probe CTA starts
within a second, not even a 48 KB one (benchmarks/check_smem_hold.py): a held SM does not offer the 100 KB the
holder leaves. The bench's --peer-smem defaults to "free" until that script shows a held SM taking 99 KB and no
more."""

from __future__ import annotations

import time

import cutlass.cute as cute
from cutlass import Int32, Int64
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_stream, make_ptr
from cutlass.cutlass_dsl import dsl_user_op

from frost.kernels.arch import SM120_SMEM_PER_SM, SMEM_RESERVED_PER_CTA, arch_config, detect_arch
from frost.kernels.compile_cache import CompileCache

RELEASE, TIMED_OUT, FIRST_RESIDENT = 0, 1, 2   # int32 slots of the flag buffer: host -> holders, holders -> host
RESIDENCY_TIMEOUT_S = 5.0


def hold_bytes(smem_per_sm: int) -> int:
    """Dynamic shared memory of one holder CTA that leaves an SM exactly SM120's shared memory (0: nothing to
    hold, the SM is no bigger than SM120's)."""
    return max(smem_per_sm - SM120_SMEM_PER_SM - SMEM_RESERVED_PER_CTA, 0)


@dsl_user_op
def _mark_and_sleep(flags: cute.Pointer, block: Int32, max_ns: Int64, *, loc=None, ip=None) -> None:
    """Mark this CTA resident (flags[FIRST_RESIDENT + block] = its SM's id + 1), then sleep until flags[RELEASE]
    turns non-zero or ``max_ns`` pass (then flags[TIMED_OUT] = 1). Volatile accesses: the flags live in mapped host
    memory."""
    from cutlass.cute.arch.nvvm_wrappers import _normalize_ptr

    body = (f"mul.wide.u32 a, $1, 4;\n\tadd.s64 a, a, $0;\n\tmov.u32 v, %smid;\n\tadd.u32 v, v, 1;\n\t"
            f"st.volatile.global.b32 [a+{4 * FIRST_RESIDENT}], v;\n\t"
            "mov.u64 t0, %globaltimer;\n\t"
            "FROST_HOLD_${:uid}:\n\t"
            f"ld.volatile.global.b32 v, [$0+{4 * RELEASE}];\n\tsetp.ne.s32 p, v, 0;\n\t@p bra FROST_FREE_${{:uid}};\n\t"
            "nanosleep.u32 20000;\n\tmov.u64 t, %globaltimer;\n\tsub.s64 t, t, t0;\n\t"
            "setp.lt.s64 p, t, $2;\n\t@p bra FROST_HOLD_${:uid};\n\t"
            f"st.volatile.global.b32 [$0+{4 * TIMED_OUT}], 1;\n\t"
            "FROST_FREE_${:uid}:\n\t")
    operands = [_normalize_ptr(flags, loc=loc, ip=ip), Int32(block).ir_value(loc=loc, ip=ip),
                Int64(max_ns).ir_value(loc=loc, ip=ip)]
    llvm.inline_asm(None, operands, "{\n\t.reg .pred p;\n\t.reg .b32 v;\n\t.reg .b64 a, t, t0;\n\t" + body + "}",
                    "l,r,l,~{memory}", has_side_effects=True, asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)


class HoldKernel:
    """One warp per CTA, ``smem`` bytes of dynamic shared memory it never touches, the largest carveout."""

    def __init__(self, smem: int):
        self.smem = smem

    @cute.jit
    def __call__(self, flags: cute.Pointer, grid: Int32, max_ns: Int64, stream):
        self.kernel(flags, max_ns).launch(grid=[grid, 1, 1], block=[32, 1, 1], smem=self.smem, stream=stream,
                                         preferred_smem_carveout=100)

    @cute.kernel
    def kernel(self, flags: cute.Pointer, max_ns: Int64):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        if tidx == 0:
            _mark_and_sleep(flags, bidx, max_ns)


def compile_hold(smem: int, arch: str, dump_dir: str | None = None):
    """The holder for ``arch`` ("sm_90a", ...); compiles without a GPU (a cross-compile). With ``dump_dir`` (an
    existing folder) the cubin is kept there and ``compiled.__cubin__`` holds its bytes."""
    flags = make_ptr(Int32, 16, cute.AddressSpace.gmem, assumed_align=16)
    opts = f"--gpu-arch {arch}" + (f" --keep-cubin --dump-dir {dump_dir}" if dump_dir else "")
    return cute.compile(HoldKernel(smem), flags, Int32(1), Int64(1), make_fake_stream(), options=opts)


class HoldBroken(RuntimeError):
    """The hold did not hold: its CTAs never all became resident, or it ended on its own timeout (the timed work
    waited for it)."""


_COMPILED: CompileCache[tuple[int, str], object] = CompileCache(lambda key: compile_hold(*key))


class Holders:
    """``grid`` holder CTAs of ``smem`` bytes each on their own stream, with the host's view of their flags."""

    def __init__(self, smem: int, grid: int, max_seconds: float, arch: str):
        import cuda.bindings.driver as cuda
        import torch

        self.grid = grid
        self.flags = torch.zeros(FIRST_RESIDENT + grid, dtype=torch.int32).pin_memory()
        self.stream = torch.cuda.Stream()
        ptr = make_ptr(Int32, self.flags.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
        max_ns = Int64(int(max_seconds * 1e9))
        _COMPILED.get((smem, arch))(ptr, Int32(grid), max_ns, cuda.CUstream(self.stream.cuda_stream))

    def resident(self) -> int:
        """How many holder CTAs have started."""
        return int((self.flags[FIRST_RESIDENT:] != 0).sum())

    def sms(self) -> list[int]:
        """The SM of each started CTA."""
        return [int(v) - 1 for v in self.flags[FIRST_RESIDENT:].tolist() if v != 0]

    def wait_resident(self, timeout_s: float) -> bool:
        """Whether every holder CTA started within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.resident() < self.grid:
            if time.monotonic() > deadline:
                return False
            time.sleep(1e-4)
        return True

    def let_go(self) -> None:
        """Tell the holders to end (those not started yet end as soon as they start); does not wait."""
        self.flags[RELEASE] = 1

    def release(self) -> bool:
        """Let the holders go and wait for them; True when they had ended on their own timeout."""
        self.let_go()
        self.stream.synchronize()
        return bool(self.flags[TIMED_OUT])


class SmemHold:
    """Context manager: SM120's shared memory per SM on the current CUDA device while inside (a no-op on a device
    whose SMs are no bigger). Raises HoldBroken on exit when the hold ended before it was released."""

    def __init__(self, max_seconds: float = 60.0):
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.arch = detect_arch(torch.cuda.current_device())
        self.sms = props.multi_processor_count
        self.smem = hold_bytes(getattr(props, "shared_memory_per_multiprocessor", 0)
                               or arch_config(self.arch).smem_per_sm)
        self.max_seconds = max_seconds
        self.holders: Holders | None = None

    def __enter__(self) -> "SmemHold":
        if self.smem == 0:
            return self
        self.holders = Holders(self.smem, self.sms, self.max_seconds, self.arch)
        if not self.holders.wait_resident(RESIDENCY_TIMEOUT_S):
            started = self.holders.resident()
            self.holders.release()
            raise HoldBroken(f"only {started} of {self.sms} holder CTAs became resident in {RESIDENCY_TIMEOUT_S} s")
        return self

    def __exit__(self, *exc) -> None:
        if self.holders is None:
            return
        timed_out = self.holders.release()
        self.holders = None
        if timed_out and exc[0] is None:
            raise HoldBroken("the holder ended on its own timeout: the timed work waited on the whole device")


__all__ = ["HoldBroken", "Holders", "SmemHold", "compile_hold", "hold_bytes"]
