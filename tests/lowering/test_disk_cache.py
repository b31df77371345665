"""The kernel disk cache: round trip, restart (a fresh process), corruption and stale entries -> warning + recompile."""

import logging
import textwrap

from frost.lowering import FakeCompiler, KernelUnit, cache_stats, clear_caches
from frost.cli import main as cli_main
from frost.lowering.disk_cache import (DiskCache, EntryKey, active_disk_cache, cache_groups, code_version,
                                      default_root, package_version, remove_groups, source_digest)
from frost.lowering.compiler import compiled_kernel
from helpers.processes import run_twice

UNIT = KernelUnit("cute_sm120", "cute_sm120|bf16|d64|causal|plain", "sm_120a")


def entry_path(compiler=None, unit=UNIT):
    return active_disk_cache().path(EntryKey(unit.key, unit.arch, (compiler or FakeCompiler()).name))


def test_default_root_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("FROST_CACHE_DIR", str(tmp_path / "x"))
    assert default_root() == tmp_path / "x"
    monkeypatch.delenv("FROST_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_root() == tmp_path / "xdg" / "frost"
    monkeypatch.setenv("FROST_DISK_CACHE", "0")
    assert active_disk_cache() is None


def test_key_includes_versions_arch_and_compiler(tmp_path):
    disk = DiskCache(tmp_path)
    key = EntryKey("k", "sm_120a", "fake", frost="1", cutlass="4.8.1")
    others = [EntryKey("k", "sm_90a", "fake", "1", "4.8.1"), EntryKey("k", "sm_120a", "cute", "1", "4.8.1"),
              EntryKey("k", "sm_120a", "fake", "2", "4.8.1"), EntryKey("k", "sm_120a", "fake", "1", "4.9"),
              EntryKey("k2", "sm_120a", "fake", "1", "4.8.1")]
    assert len({disk.path(k) for k in [key, *others]}) == 6
    disk.store(key, b"payload")
    assert disk.load(key) == b"payload" and all(disk.load(k) is None for k in others)


def test_source_digest_follows_the_kernel_code_not_its_comments(tmp_path):
    """A kernel whose code changes under the same version number gets new disk-cache entries; one whose comments,
    docstrings or formatting change keeps its entries (uncached digest per call). Modules in subfolders count."""
    digest = source_digest.__wrapped__
    (tmp_path / "family").mkdir()
    (tmp_path / "a.py").write_text('"""Module doc."""\nx = 1\n')
    (tmp_path / "family" / "b.py").write_text("def f(y):\n    return y + 2\n")
    first = digest(tmp_path, ())
    (tmp_path / "notes.txt").write_text("not code")
    (tmp_path / "a.py").write_text('"""Another doc."""\n# a comment\n\nx = 1  # why\n')
    (tmp_path / "family" / "b.py").write_text('def f(y):\n    """Adds two."""\n    return (y\n            + 2)\n')
    assert digest(tmp_path, ()) == first
    (tmp_path / "family" / "b.py").write_text("def f(y):\n    return y + 3\n")
    assert digest(tmp_path, ()) != first
    (tmp_path / "family" / "b.py").write_text("def f(y):\n    return y + 2\n")
    assert digest(tmp_path, ()) == first
    (tmp_path / "family" / "b.py").rename(tmp_path / "b.py")     # a moved module is another module
    assert digest(tmp_path, ()) != first
    (tmp_path / "b.py").rename(tmp_path / "family" / "b.py")
    limits = tmp_path / "limits.py"
    limits.write_text("PAD = 8\n")
    with_limits = digest(tmp_path, (limits,))
    assert with_limits != first
    limits.write_text("PAD = 16\n")
    assert digest(tmp_path, (limits,)) != with_limits


def test_a_string_that_is_not_a_docstring_counts(tmp_path):
    digest = source_digest.__wrapped__
    (tmp_path / "a.py").write_text('x = 1\nNAME = "a"\n')
    first = digest(tmp_path, ())
    (tmp_path / "a.py").write_text('x = 1\nNAME = "b"\n')
    assert digest(tmp_path, ()) != first


def test_default_key_carries_the_code_version(tmp_path):
    import frost

    key = EntryKey("k", "sm_120a", "fake").resolved()
    assert key.frost == code_version() == f"{frost.__version__}+{source_digest()}"
    assert f"frost-{key.frost}" in str(DiskCache(tmp_path).path(EntryKey("k", "sm_120a", "fake")))


def _cache_tree(root):
    """One loadable group (this frost code, this cutlass-dsl) and two stale ones, plus a file that is not ours."""
    current = root / f"frost-{code_version()}" / f"cutlass-{package_version('nvidia-cutlass-dsl')}"
    stale = [root / "frost-0.1.0" / "cutlass-4.8.1", root / f"frost-{code_version()}" / "cutlass-0.0"]
    for i, group in enumerate([current, *stale]):
        (group / "sm_120a" / "cute").mkdir(parents=True)
        (group / "sm_120a" / "cute" / f"{i}.bin").write_bytes(b"x" * (100 + i))
    (root / "notes.txt").write_text("not a cache entry")
    return current, stale


def test_prune_keeps_what_this_frost_can_load(tmp_path):
    current, stale = _cache_tree(tmp_path)
    groups = cache_groups(tmp_path)
    assert sorted(g.path for g in groups) == sorted([current, *stale])
    assert [g.path for g in groups if g.current] == [current] and all(g.entries == 1 for g in groups)
    gone = remove_groups(tmp_path, stale_only=True)
    assert sorted(g.path for g in gone) == sorted(stale)
    assert [g.path for g in cache_groups(tmp_path)] == [current]
    assert not (tmp_path / "frost-0.1.0").exists() and (tmp_path / "notes.txt").exists()


def test_cache_command_shows_prunes_and_clears(tmp_path, capsys):
    current, stale = _cache_tree(tmp_path)
    assert cli_main(["cache", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert code_version() in out and "2 group(s)" in out and "--prune" in out
    assert cli_main(["cache", "--prune", "--dir", str(tmp_path)]) == 0
    assert "removed 2 group(s)" in capsys.readouterr().out and current.exists()
    assert cli_main(["cache", "--clear", "--dir", str(tmp_path)]) == 0
    assert "removed 1 group(s)" in capsys.readouterr().out and cache_groups(tmp_path) == []
    assert (tmp_path / "notes.txt").exists()


def test_memory_then_disk_then_compile():
    compiler = FakeCompiler()
    compiled_kernel(compiler, UNIT)
    compiled_kernel(compiler, UNIT)
    assert (cache_stats().compiles, cache_stats().kernel_hits, cache_stats().disk_writes) == (1, 1, 1)
    clear_caches()                           # a "new process": memory gone, disk kept
    kernel = compiled_kernel(compiler, UNIT)
    assert kernel.key == UNIT.key and cache_stats().compiles == 1 and cache_stats().disk_hits == 1
    assert compiler.compiled == [UNIT.key]


def test_garbage_entry_is_recompiled_with_a_warning(caplog):
    compiler = FakeCompiler()
    compiled_kernel(compiler, UNIT)
    entry_path(compiler).write_bytes(b"\x00garbage\xff" * 10)
    clear_caches()
    with caplog.at_level(logging.WARNING, logger="frost"):
        kernel = compiled_kernel(compiler, UNIT)
    assert kernel.key == UNIT.key and len(compiler.compiled) == 2
    assert cache_stats().disk_errors == 1 and "corrupt or stale" in caplog.text
    assert entry_path(compiler).read_bytes().startswith(b"FROSTKC1")   # rewritten after the recompile


def test_truncated_and_unloadable_entries(caplog):
    compiler = FakeCompiler()
    compiled_kernel(compiler, UNIT)
    path = entry_path(compiler)
    path.write_bytes(path.read_bytes()[:-3])                       # truncated: checksum fails
    clear_caches()
    compiled_kernel(compiler, UNIT)
    other = FakeCompiler()                                          # same name, but rejects the payload
    other.deserialize = lambda data, unit: (_ for _ in ()).throw(RuntimeError("cannot load module"))
    clear_caches()
    with caplog.at_level(logging.WARNING, logger="frost"):
        compiled_kernel(other, UNIT)
    assert len(compiler.compiled) == 2 and len(other.compiled) == 1
    assert cache_stats().disk_errors == 2 and "unloadable (RuntimeError: cannot load module)" in caplog.text


def test_unwritable_cache_dir_only_warns(monkeypatch, tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("FROST_CACHE_DIR", str(blocker))
    with caplog.at_level(logging.WARNING, logger="frost"):
        assert compiled_kernel(FakeCompiler(), UNIT).key == UNIT.key
    assert "cannot write kernel cache entry" in caplog.text


CHILD = textwrap.dedent("""
    import json
    from frost.lowering import FakeCompiler, KernelUnit, cache_stats
    from frost.lowering.compiler import compiled_kernel
    compiled_kernel(FakeCompiler(), KernelUnit("cute_sm120", "cute_sm120|bf16|d64|causal|plain", "sm_120a"))
    print(json.dumps(cache_stats().as_dict()))
""")


def test_survives_process_restart(tmp_path):
    runs = run_twice(CHILD, tmp_path / "shared-cache")
    assert (runs[0]["compiles"], runs[0]["disk_writes"]) == (1, 1)
    assert (runs[1]["compiles"], runs[1]["disk_hits"]) == (0, 1)
