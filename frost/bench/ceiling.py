"""`frost bench --ceiling`: measure the mma.sync ceiling (frost.bench.mma_ceiling) and report it as data; a failure
(no GPU, compile error) becomes {"error": ...}, never an exception."""

from __future__ import annotations

from dataclasses import asdict


def measure(ctas_per_sm=(1, 2, 4)) -> dict:
    try:
        from frost.bench.mma_ceiling import measure_ceiling

        return {"points": [asdict(p) for p in measure_ceiling(ctas_per_sm=ctas_per_sm)]}
    except Exception as exc:  # noqa: BLE001
        from frost.bench.runner import short

        return {"error": short(exc, 300)}
