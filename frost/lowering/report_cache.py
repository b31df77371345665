"""Probe reports on disk: a process compiling a graph that an earlier process compiled (same frost code, same
target) reads the report back instead of analysing the graph again.

The analysis takes milliseconds, but it builds a networkx graph, and importing networkx (0.17-0.25 s) would be most
of what ``frost.compile`` costs in a new process whose kernels come from the disk cache (0.10-0.15 s with this
cache: docs/performance.md). Entries use the kernel cache's format and switch (FROST_DISK_CACHE;
checksummed, atomic: a bad one is logged, removed and the graph probed again) under ``<cache root>/reports``, in a
group named by frost's version and a digest of the sources of the analyzer, the IR and frost.errors and of the
pydantic version: a changed capability table, rule or fact never reads a report written by other code, and
``frost cache --prune`` deletes the groups of other code. The key is the graph's JSON (shapes included: one entry, a
few KB, per distinct graph, at most MAX_REPORTS per target), so equal graphs share an entry.

Only the compile paths read it. ``frost.check_support`` and the analyzer's ``probe`` stay side-effect free."""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from frost.analyzer import SupportReport, probe
from frost.lowering.disk_cache import EntryKey, EntryKind, active_disk_cache, package_version, source_digest
from frost.lowering.stats import COUNTERS

REPORT_ENTRIES = EntryKind("probe-report cache", "probing the graph again", "report", subdir="reports")
MAX_REPORTS = 4096   # per target and frost code: each distinct graph (shapes included) adds one entry of a few KB
_FROST = Path(__file__).resolve().parents[1]
ANALYSIS_SOURCES = (_FROST / "analyzer", _FROST / "ir")


@lru_cache(maxsize=None)
def analysis_digest() -> str:
    """What a report is computed from besides the graph: the analyzer's, the IR's and frost.errors' sources and the
    pydantic version (16 hex digits)."""
    h = hashlib.sha256()
    for directory in ANALYSIS_SOURCES:
        h.update(source_digest(directory).encode())
    h.update((_FROST / "errors.py").read_bytes())
    h.update(package_version("pydantic").encode())
    return h.hexdigest()[:16]


def report_key(graph_text: str, target: str) -> EntryKey:
    import frost

    return EntryKey(compile_key=graph_text, arch=target, compiler="probe",
                    frost=f"{frost.__version__}+{analysis_digest()}", cutlass="none")


def report_root(root: Path) -> Path:
    """Where the reports of a cache root live (beside, not inside, the kernel groups)."""
    return REPORT_ENTRIES.root(root)


def current_report_group() -> tuple[str, str]:
    """The (frost-*, cutlass-*) directory names the reports of this frost code are read from."""
    return report_key("", "").group_dirs()


def probe_with_disk_cache(graph, target: str, graph_text: str | None) -> SupportReport:
    """probe(graph, target) for a normalised ``target``, read from the disk cache when an earlier process stored it
    (``graph_text``: the graph's JSON, the key; None probes without the cache)."""
    disk = active_disk_cache(REPORT_ENTRIES)
    if disk is None or graph_text is None:
        return probe(graph, target)
    key = report_key(graph_text, target)
    blob = disk.load(key)
    if blob is not None:
        try:
            report = SupportReport.model_validate_json(blob)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            disk.discard(key, f"unreadable ({type(exc).__name__})")
        else:
            COUNTERS.bump("report_hits")
            return report
    report = probe(graph, target)
    disk.store(key, report.model_dump_json().encode())
    _trim(disk.path(key).parent)
    return report


def _trim(directory: Path) -> None:
    """Keep a target's reports to MAX_REPORTS: past it, the least recently written eighth goes (a workload with
    ever new shapes, e.g. a new sequence length every step, must not grow the cache without bound)."""
    try:
        entries = [e for e in os.scandir(directory) if e.name.endswith(".bin")]
        if len(entries) <= MAX_REPORTS:
            return
        entries.sort(key=lambda e: e.stat().st_mtime_ns)
        for e in entries[:len(entries) - MAX_REPORTS + MAX_REPORTS // 8]:
            os.unlink(e.path)
    except OSError:  # a concurrent trim or a read-only directory: the next store tries again
        pass
