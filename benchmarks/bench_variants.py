"""Tile-config variants for tuning runs, not used by the engine: VARIANTS (whole tiles, for bench_kernels.py
--variants) and CANDIDATES (changes to the kernel set a problem runs on, with that set's ptxas options, for the
alternating-process A/B runs of ab_variants.py)."""

from dataclasses import replace

from tools.ab import Candidate
from frost.kernels.backward.catalogue import GRID_VARIANTS, TileConfig, tile_for_pads

VARIANTS = {
    **GRID_VARIANTS,
    "d64_n64m64_b2": TileConfig(64, 64, 64, 2, 2, False, 64, min_blocks=2),
    "d64_n128m32": TileConfig(64, 128, 32, 2, 2, False, 64),
    "d64_n128m64": TileConfig(64, 128, 64, 2, 2, False, 64),
    "d128_n128m32": TileConfig(128, 128, 32, 2, 1, False, 64),
    "d128_n128m32_c128": TileConfig(128, 128, 32, 2, 1, False, 128),
    "d128_n64m32_c128": TileConfig(128, 64, 32, 2, 2, False, 128),
    "d128_2p_n64m64_b2": TileConfig(128, 64, 64, 2, 1, True, 64, min_blocks=2),
    "d128_n64m64_q2d1": TileConfig(128, 64, 64, 2, 1, False, 64),
    "d128_2p_n64m32_b3": TileConfig(128, 64, 32, 2, 2, True, 64, min_blocks=3),
    "d64_n128m32_r32": TileConfig(64, 128, 32, 2, 2, False, 64, rows_per_warp=32),
    "d64_n128m64_r32": TileConfig(64, 128, 64, 2, 2, False, 64, rows_per_warp=32),
    "d64_n256m32_r32": TileConfig(64, 256, 32, 2, 2, False, 64, rows_per_warp=32),
    "d128_2p_n128m32_r32": TileConfig(128, 128, 32, 2, 1, True, 64, rows_per_warp=32),
    "d128_2p_r32_c128": TileConfig(128, 128, 32, 2, 1, True, 128, rows_per_warp=32),
    "d64_r32_s21": TileConfig(64, 128, 32, 2, 1, False, 64, rows_per_warp=32),
    "d64_r32_s12": TileConfig(64, 128, 32, 1, 2, False, 64, rows_per_warp=32),
    "d64_r32_s11": TileConfig(64, 128, 32, 1, 1, False, 64, rows_per_warp=32),
    "d128_q1d2": TileConfig(128, 128, 32, 1, 2, False, 128),
    "d128_kreg": TileConfig(128, 128, 32, 2, 1, False, 128, k_in_regs=True),
    "d96_kreg": TileConfig(96, 64, 64, 2, 2, False, 32, k_in_regs=True),
    "d32_kreg": TileConfig(32, 128, 64, 2, 2, False, 32, k_in_regs=True),
    "d96_n128m64_kreg": TileConfig(96, 128, 64, 1, 1, False, 32, k_in_regs=True),
    "d96_n128m64_c96_kreg": TileConfig(96, 128, 64, 1, 1, False, 96, k_in_regs=True),
    "d32_r32": TileConfig(32, 128, 64, 2, 2, False, 32, rows_per_warp=32),
    "d32_r32_m32_kreg": TileConfig(32, 128, 32, 2, 2, False, 32, rows_per_warp=32, k_in_regs=True),
    "d160_kreg": TileConfig(160, 64, 32, 2, 2, True, 32, k_in_regs=True),
    "d160_1p": TileConfig(160, 64, 32, 2, 1, False, 32),
    "d192_kreg": TileConfig(192, 64, 32, 2, 1, True, 64, k_in_regs=True),
    "d128_n64m16": TileConfig(128, 64, 16, 2, 1, False, 128),
    "d128_n64m16_kreg": TileConfig(128, 64, 16, 2, 1, False, 128, k_in_regs=True),
    "d128_n64m16_q1": TileConfig(128, 64, 16, 1, 1, False, 128),
    "d96_n64m32_kreg": TileConfig(96, 64, 32, 2, 1, False, 96, k_in_regs=True),
    "d96_n64m32_q1_kreg": TileConfig(96, 64, 32, 1, 1, False, 96, k_in_regs=True),
    "d192_grid_m32_c64": TileConfig(192, 64, 32, 2, 2, False, 64, warp_grid=True),
    "d256_grid_2p": TileConfig(256, 64, 32, 1, 1, True, 128, warp_grid=True),
    "d256_grid_2p_c64": TileConfig(256, 64, 32, 1, 1, True, 64, warp_grid=True),
    "d256_grid_2p_c256": TileConfig(256, 64, 32, 1, 1, True, 256, warp_grid=True),
    "d64_grid": TileConfig(64, 64, 64, 2, 2, False, 64, warp_grid=True),
    # 32-row query tiles with the whole 96-wide dQ chunk: 8-column dQ warp slices (dq_col_step) make it legal
    "d96_n128m32_c96_kreg": TileConfig(96, 128, 32, 2, 2, False, 96, k_in_regs=True),
    "d96_n128m32_q2d1_c96_kreg": TileConfig(96, 128, 32, 2, 1, False, 96, k_in_regs=True),
    # d160 (Stable Diffusion 1.x's third-level heads): the whole 160-wide dQ chunk, dO double-buffered, both
    "d160_c160": TileConfig(160, 64, 32, 2, 1, False, 160),
    "d160_d2": TileConfig(160, 64, 32, 2, 2, False, 32),
    "d160_d2_c160": TileConfig(160, 64, 32, 2, 2, False, 160),
    # pad 48 (head dims 40 and 48): the d64, d32 and d80 tile shapes
    "d48_r32_s11": TileConfig(48, 128, 32, 1, 1, False, 48, rows_per_warp=32),
    "d48_r32_s22": TileConfig(48, 128, 32, 2, 2, False, 48, rows_per_warp=32),
    "d48_r32_m64": TileConfig(48, 128, 64, 2, 2, False, 48, rows_per_warp=32),
    "d48_m64_kreg": TileConfig(48, 128, 64, 2, 2, False, 48, k_in_regs=True),
    # d64 with 256 keys per CTA (one CTA of 8 warps per SM instead of two of 4): 14-21 % more time
    "d64_n256m32_r32_s21": TileConfig(64, 256, 32, 2, 1, False, 64, rows_per_warp=32),
    # the atomic set's tiles before bwd_main_lag: K in registers, dQ in the step, two barriers
    "d128_mid_barrier": TileConfig(128, 128, 32, 2, 1, False, 128, k_in_regs=True, diff_mask=True),
    "d96_mid_barrier": TileConfig(96, 128, 32, 2, 1, False, 96, k_in_regs=True),
    "d80_mid_barrier": TileConfig(80, 128, 64, 2, 2, False, 80, k_in_regs=True),
    # d128's lagged step with its CTA barrier (bwd_main_lag), served before bwd_main_pipe
    "d128_lag_barrier": TileConfig(128, 128, 32, 2, 2, False, 128, dq_lag=True, diff_mask=True),
    # the served d128 / d64 tiles with 16-byte dQ adds (dq_red_v4)
    "d128_red_v4": replace(tile_for_pads(128, 0), dq_red_v4=True),
    "d64_red_v4": replace(tile_for_pads(64, 0), dq_red_v4=True),
    # bwd_main_pipe with two Q/dO stages, served at d128 before the third stage
    "d128_pipe2": TileConfig(128, 128, 32, 2, 2, False, 128, dq_lag=True, dq_lag_mbar=True, diff_mask=True),
    # the lagged dQ on the 32-row, two-CTA tiles: no spills (bf16, sm_90a and sm_120a) but slower than the served
    # tiles (B4 H16 S4096: d48 +1.4 % / +2.2 %, d32 +35 % / +29 % non-causal / causal); d64 and
    # d160 spill with it (40-96 and 8-24 bytes)
    "d48_lag": TileConfig(48, 128, 32, 2, 2, False, 48, rows_per_warp=32, dq_lag=True),
    "d32_lag": TileConfig(32, 128, 32, 2, 2, False, 32, rows_per_warp=32, dq_lag=True),
}


# Candidates compile-checked on a CPU machine (check_candidates.py) and not yet timed: ab_variants.py times them
# against the served sets; a faster one is served after the GPU validation and the compile gate pass on it.
_LEVEL6_SM90 = {"sm_90a": "--register-usage-level 6"}
CANDIDATES = {
    # d256's dq_gemm set (both modes at head dims 200-256) in one pass instead of two: its main kernel holds no dQ,
    # so dK and dV (64 x 256 fp32 each: 128 registers a thread for the two, over 8 warps) fit beside V in
    # registers; the walk then computes S once instead of twice and reads Q and dO once (4 GEMMs a step instead of
    # 2 + 3). CPU compile check (check_candidates.py): bf16 and fp16 spill-free on sm_120a at
    # ptxas's default level (255 / 254 registers); bf16 on sm_90a at level 6 (254; 8 bytes of stack at the
    # default level); fp16 on sm_90a spills 8-16 bytes at levels 4-8, so serving it needs a catalogue._TARGET_CHANGES
    # entry that keeps two passes there. Static SASS of the main kernel (check_candidates.py --served, bf16): HMMA
    # 160 -> 128, LDSM 120 -> 88, BAR 9 -> 5, instructions 2088 -> 1632 (sm_120a) and 1928 -> 1544 (sm_90a).
    "d256_dqg_1p": Candidate(256, ("dq_gemm",), {"two_pass": False}, _LEVEL6_SM90,
                             "spill-free but fp16 on sm_90a (16 bytes)"),
    # the same with lean refills at level 2 (TileConfig.lean_refill; on the two-pass set they measured slower):
    # bf16 sm_120a 255, sm_90a 254 (level 6), fp16 sm_120a 254 registers, no spill; fp16
    # sm_90a spills 16 bytes at level 6.
    "d256_dqg_1p_lean2": Candidate(256, ("dq_gemm",), {"two_pass": False, "lean_refill": 2}, _LEVEL6_SM90,
                                   "spill-free but fp16 on sm_90a (16 bytes)"),
}
