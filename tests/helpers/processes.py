"""Running Python code in fresh processes: what a cache must survive is a process restart."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run_twice(code: str, cache_dir, unset: tuple[str, ...] = ()) -> list[dict]:
    """Runs `code` in two fresh Python processes, one after the other, that share the disk-cache directory
    `cache_dir` (FROST_CACHE_DIR; the variables in `unset` removed); returns the JSON object each printed on its last
    line of output."""
    env = dict(os.environ, FROST_CACHE_DIR=str(cache_dir))
    for name in unset:
        env.pop(name, None)
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return runs
