"""Compiled kernels and the probe reports of compiled graphs on disk, as opaque bytes, so a new process skips the
compile and the analysis.

A kernel entry is keyed by frost version (with a digest of the kernel sources' code, so that a changed kernel never
loads code compiled from an older one under the same version number, while an edited comment recompiles nothing) +
cutlass-dsl version + target arch + compiler + compile key. Each file carries its own key and a checksum: a corrupt,
truncated or foreign entry is logged, removed and rebuilt, never a crash. Writes are atomic (temp file + rename), so
concurrent processes never see half an entry.

Probe reports (probe_with_disk_cache) use the same format and switch (FROST_DISK_CACHE) under ``<cache
root>/reports``. The analysis takes milliseconds, but it builds a networkx graph, and importing networkx (0.17-0.25 s)
would be most of what ``frost.compile`` costs in a new process whose kernels come from the disk cache (0.10-0.15 s
with this cache: docs/performance.md). A report's group is named by frost's version and a digest of the sources of
the analyzer, the IR and frost.errors and of the pydantic version: a changed capability table, rule or fact never
reads a report written by other code, and ``frost cache --prune`` deletes the groups of other code. The key is the
graph's JSON (shapes included: one entry, a few KB, per distinct graph, at most MAX_REPORTS per target), so equal
graphs share an entry. Only the compile paths read reports; ``frost.check_support`` and the analyzer's ``probe``
stay side-effect free."""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import shutil
import struct
import sys
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from frost import settings
from frost.analyzer import SupportReport, probe
from frost.lowering.plan_cache import COUNTERS

log = logging.getLogger("frost")
MAGIC = b"FROSTKC1"


@lru_cache(maxsize=None)
def package_version(dist: str, fallback: str = "none") -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return fallback


_FROST = Path(__file__).resolve().parents[1]
KERNEL_SOURCES = _FROST / "kernels"
LIMITS_SOURCE = _FROST / "limits.py"   # the kernels' limits, which they read


def code_ast(source: str) -> str:
    """A module's code as its syntax tree with the docstrings left out: comments, docstrings, blank lines and
    formatting do not change it, code does. Dumped without positions (line numbers do not count either)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


@lru_cache(maxsize=None)
def source_digest(directory: Path = KERNEL_SOURCES, extra: tuple[Path, ...] = (LIMITS_SOURCE,)) -> str:
    """sha256 (16 hex digits) over the relative path and code (code_ast) of every .py file under ``directory``, in
    path order, and of the ``extra`` files, with the Python version (which shapes the syntax tree): what the compiled
    kernels come from. Editing a comment or docstring keeps the digest, so it recompiles nothing."""
    h = hashlib.sha256(f"python {sys.version_info[0]}.{sys.version_info[1]}".encode())
    root = Path(directory)
    files = [(p.relative_to(root).as_posix(), p) for p in sorted(root.rglob("*.py"))]
    for name, path in files + [(Path(p).name, Path(p)) for p in extra]:
        h.update(name.encode() + b"\0" + code_ast(path.read_text()).encode() + b"\0")
    return h.hexdigest()[:16]


def code_version() -> str:
    """frost's version and the kernel sources' digest: what a disk-cache entry was compiled from."""
    import frost

    return f"{frost.__version__}+{source_digest()}"


@dataclass(frozen=True)
class EntryKey:
    compile_key: str
    arch: str
    compiler: str
    frost: str = ""
    cutlass: str = ""

    def resolved(self) -> "EntryKey":
        return EntryKey(self.compile_key, self.arch, self.compiler, self.frost or code_version(),
                        self.cutlass or package_version("nvidia-cutlass-dsl"))

    def group_dirs(self) -> tuple[str, str]:
        """The (frost-*, cutlass-*) directory names of this key's group (see cache_groups)."""
        k = self.resolved()
        return f"frost-{k.frost}", f"cutlass-{k.cutlass}"


def default_root() -> Path:
    """FROST_CACHE_DIR, else $XDG_CACHE_HOME/frost, else ~/.cache/frost."""
    if os.environ.get("FROST_CACHE_DIR"):
        return Path(os.environ["FROST_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "frost"


@dataclass(frozen=True)
class EntryKind:
    """What a store holds, for its log lines and its cache_stats counters (``<counter>_writes``/``_errors``)."""

    label: str      # "kernel cache": "frost: kernel cache entry ... is corrupt"
    redo: str       # what a bad entry costs: "recompiling"
    counter: str    # counter prefix in frost.lowering.plan_cache.CacheStats
    subdir: str = ""  # where under the cache root this kind's groups live ("": the root itself)

    def root(self, cache_root: Path) -> Path:
        return Path(cache_root) / self.subdir


KERNEL_ENTRIES = EntryKind("kernel cache", "recompiling", "disk")


def active_disk_cache(kind: EntryKind = KERNEL_ENTRIES) -> "DiskCache | None":
    """The disk cache for ``kind`` to use now (the environment is read on every miss), or None when
    FROST_DISK_CACHE=0."""
    if not settings.switch("FROST_DISK_CACHE", True):
        return None
    return DiskCache(kind.root(default_root()), kind)


class DiskCache:
    def __init__(self, root: Path, kind: EntryKind = KERNEL_ENTRIES) -> None:
        self.root = Path(root)
        self.kind = kind

    def path(self, key: EntryKey) -> Path:
        k = key.resolved()
        digest = hashlib.sha256(k.compile_key.encode()).hexdigest()[:40]
        return self.root.joinpath(*k.group_dirs(), k.arch, k.compiler, f"{digest}.bin")

    def load(self, key: EntryKey) -> bytes | None:
        """The payload, or None when absent; a bad entry is logged and removed."""
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("frost: cannot read %s entry %s (%s); %s", self.kind.label, path, exc, self.kind.redo)
            return None
        try:
            return _decode(blob, key.resolved())
        except ValueError as exc:
            self.discard(key, f"corrupt or stale ({exc})")
            return None

    def discard(self, key: EntryKey, why: str) -> None:
        path = self.path(key)
        log.warning("frost: %s entry %s is %s; %s", self.kind.label, path, why, self.kind.redo)
        COUNTERS.bump(f"{self.kind.counter}_errors")
        try:
            path.unlink()
        except OSError:
            pass

    def store(self, key: EntryKey, payload: bytes) -> None:
        """Write atomically; a failure (read-only dir, full disk) is logged, not raised."""
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(_encode(payload, key.resolved()))
            os.replace(tmp, path)
            COUNTERS.bump(f"{self.kind.counter}_writes")
        except OSError as exc:
            log.warning("frost: cannot write %s entry %s (%s)", self.kind.label, path, exc)


def _encode(payload: bytes, key: EntryKey) -> bytes:
    header = json.dumps({**asdict(key), "sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)}).encode()
    return MAGIC + struct.pack("<I", len(header)) + header + payload


def _decode(blob: bytes, key: EntryKey) -> bytes:
    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 4:
        raise ValueError("bad magic")
    (n,) = struct.unpack_from("<I", blob, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(blob[start:start + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError("unreadable header") from exc
    payload = blob[start + n:]
    if not isinstance(header, dict) or {k: header.get(k) for k in asdict(key)} != asdict(key):
        raise ValueError("written for another key or version")
    if header.get("size") != len(payload) or header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise ValueError("checksum mismatch")
    return payload


@dataclass(frozen=True)
class CacheGroup:
    """The entries of one (frost code version, cutlass-dsl version) directory pair of a cache root."""

    path: Path
    entries: int
    size: int
    current: bool    # compiled by this frost code and this cutlass-dsl: the ones a lookup can load


def cache_groups(root: Path, current: tuple[str, str] | None = None) -> list[CacheGroup]:
    """Every frost-*/cutlass-* directory under ``root`` with its entry count and bytes (nothing else is looked at);
    ``current``: the (frost-*, cutlass-*) names a lookup reads now (default: this frost's kernel code)."""
    current = current or EntryKey("", "", "").group_dirs()
    groups = []
    for frost_dir in sorted(Path(root).glob("frost-*")):
        for cutlass_dir in sorted(frost_dir.glob("cutlass-*")):
            files = [f for f in cutlass_dir.rglob("*.bin") if f.is_file()]
            groups.append(CacheGroup(cutlass_dir, len(files), sum(f.stat().st_size for f in files),
                                     (frost_dir.name, cutlass_dir.name) == current))
    return groups


def remove_groups(root: Path, stale_only: bool, current: tuple[str, str] | None = None) -> list[CacheGroup]:
    """Delete the groups no lookup can load any more (``stale_only``) or all of them; returns what went (a group
    that could not be deleted, e.g. for permissions, is left out). Empty frost-* directories go too."""
    doomed = [g for g in cache_groups(root, current) if not (stale_only and g.current)]
    for g in doomed:
        shutil.rmtree(g.path, ignore_errors=True)
    for frost_dir in Path(root).glob("frost-*"):
        if frost_dir.is_dir() and not any(frost_dir.iterdir()):
            frost_dir.rmdir()
    return [g for g in doomed if not g.path.exists()]


REPORT_ENTRIES = EntryKind("probe-report cache", "probing the graph again", "report", subdir="reports")
MAX_REPORTS = 4096   # per target and frost code: each distinct graph (shapes included) adds one entry of a few KB
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
