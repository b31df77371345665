"""`frost cache [--prune | --clear] [--dir DIR]`: where compiled kernels (and the probe reports of compiled graphs)
are kept on disk, how much, and removal of the entries this frost can no longer load (each kernel-source or
cutlass-dsl change starts a new kernel group, each analyzer or IR change a new report group)."""

from __future__ import annotations

import os

from frost.commands.arg_types import directory
from frost.errors import SettingError


def register(sub) -> None:
    p = sub.add_parser("cache", help="show the on-disk kernel cache; --prune drops entries this frost cannot load")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--prune", action="store_true",
                      help="delete the entries of other frost code or cutlass-dsl versions (never loaded again)")
    what.add_argument("--clear", action="store_true", help="delete every entry")
    p.add_argument("--dir", type=directory,
                   help="the cache root (default: FROST_CACHE_DIR, else the user cache dir)")
    p.set_defaults(func=run)


def run(args) -> int:
    from frost.lowering.disk_cache import (cache_groups, code_version, current_report_group, default_root,
                                          remove_groups, report_root)

    root = args.dir or default_root()
    if root.exists() and not root.is_dir():   # --dir is checked by argparse; the default root here
        source = "FROST_CACHE_DIR" if os.environ.get("FROST_CACHE_DIR") else "the default cache root"
        raise SettingError(source, str(root), "a directory, or a path where none exists yet (this is a file)")
    stores = ((root, None), (report_root(root), current_report_group()))   # (directory, its current group)
    if args.prune or args.clear:
        gone = [g for path, current in stores for g in remove_groups(path, args.prune, current)]
        for g in gone:
            print(f"removed {g.path} ({g.entries} entries, {_mib(g.size)})")
        print(f"removed {len(gone)} group(s), {_mib(sum(g.size for g in gone))} under {root}")
        return 0
    groups = [g for path, current in stores for g in cache_groups(path, current)]
    print(f"kernel cache: {root}  (this frost: {code_version()}; probe reports under {report_root(root).name}/)")
    for g in groups:
        print(f"  {'*' if g.current else ' '} {g.path.relative_to(root)}  {g.entries} entries, {_mib(g.size)}")
    stale = [g for g in groups if not g.current]
    if stale:
        print(f"{len(stale)} group(s) ({_mib(sum(g.size for g in stale))}) cannot be loaded by this frost: "
              "`frost cache --prune` deletes them")
    elif not groups:
        print("  (empty)")
    return 0


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"
