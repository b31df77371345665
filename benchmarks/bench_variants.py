"""Tile-config variants for tuning runs of bench_kernels.py (--variants); not used by the engine."""

from frost.kernels.tiles import GRID_VARIANTS, TileConfig

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
    "d64_grid": TileConfig(64, 64, 64, 2, 2, False, 64, warp_grid=True),
}
