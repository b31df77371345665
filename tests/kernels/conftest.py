"""benchmarks/ on sys.path, so tests can import the tuning tools (benchmarks/tools) the way its scripts do."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
