"""The dq_gemm sets' dS workspace, host side (pure Python): its size and the cap above which a problem runs on
another set (select.select reads it at plan time, api.workspace_regions sizes the region from it)."""

from __future__ import annotations

from frost import settings
from frost.limits import seq_pad

MAIN_KN = 128     # keys of the main kernel's KV tile (TileConfig.n_block): the workspace's key rows pad to it


def _max_bytes_from_env() -> int:
    return settings.count("FROST_DQ_GEMM_MAX_BYTES", 2 ** 31)


# The largest dS workspace a dq_gemm set is used with (B4 H16 S4096 takes 2 GiB; FROST_DQ_GEMM_MAX_BYTES sets
# another, 0 for none); a problem needing more runs on the ordered relay (deterministic) or the atomic set instead,
# which need no workspace of that size.
DQ_GEMM_MAX_BYTES = _max_bytes_from_env()


def ds_workspace_bytes(batch: int, heads: int, seq_q: int, seq_kv: int) -> int:
    """Bytes of the dS workspace (16-bit elements, keys padded to MAIN_KN, queries like the workspace rows)."""
    return batch * heads * (-(-seq_kv // MAIN_KN) * MAIN_KN) * seq_pad(seq_q) * 2


def dq_gemm_fits(batch: int, heads: int, seq_q: int, seq_kv: int) -> bool:
    """Whether a problem's dS workspace is within DQ_GEMM_MAX_BYTES."""
    return ds_workspace_bytes(batch, heads, seq_q, seq_kv) <= DQ_GEMM_MAX_BYTES
