"""Compile every served kernel set (the backward's sets and the forward's kernels, dense and packed) for sm_120a and
sm_90a in both dtypes (no GPU needed) and write a digest per cubin, so that two trees can be shown to build the same
machine code.

    python3 benchmarks/cubin_digests.py OUT.json [--jobs N]          # digests of the tree on PYTHONPATH
    python3 benchmarks/cubin_digests.py OUT.json --only sm_120a/bfloat16/d64v64   # the sets whose tag has it
    python3 benchmarks/cubin_digests.py --compare BEFORE.json AFTER.json

Each set gets two digests: ``raw``, the cubin's bytes, and ``code``, its ELF sections with each kernel's mangled
name replaced by its role (preprocess, main, dq_convert, dq_gemm). The mangled names hold the kernel's module path,
so moving a kernel module changes ``raw`` but not ``code``; any change to an instruction, a resource, a constant
bank or the shared-memory size changes both. --compare prints one summary line and each set that differs, and exits
1 where a ``code`` digest differs or a set is missing on either side."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
from concurrent.futures import ProcessPoolExecutor

ARCHS = ("sm_120a", "sm_90a")


def set_tag(key) -> str:
    """arch/dtype/d<Q/K pad>v<V pad>/kind: a set's name in the digest file."""
    kind = ("narrow" if key.narrow else "dq_gemm" if key.dq_gemm else "mha" + "_ordered" * key.ordered if key.mha
            else "ordered" if key.ordered else "atomic")
    return (f"{key.arch}/{key.dtype}/d{key.head_dim_pad}v{key.head_dim_v_pad or key.head_dim_pad}/{kind}"
            + ("/varlen" if key.varlen else ""))


def forward_tag(key) -> str:
    """arch/dtype/d<Q/K pad>v<V pad>/forward[/varlen]: a forward kernel's name in the digest file."""
    return f"{key.arch}/{key.dtype}/d{key.head_dim_pad}v{key.head_dim_v_pad}/forward" + ("/varlen" if key.varlen else "")


def served_sets() -> list:
    """(tag, key) of every served kernel set: the backward's (select.served_keys, the packed ones too) and the
    forward's (every served pad pair, dense and packed) on ARCHS."""
    from frost.kernels.backward.select import DTYPES, served_keys
    from frost.kernels.forward.select import ForwardKey
    from frost.kernels.forward.tiles import served_forward_pads

    forward = [ForwardKey(dtype, d, dv, arch, varlen) for arch in ARCHS for dtype in DTYPES
               for d, dv in served_forward_pads() for varlen in (False, True)]
    return [(set_tag(k), k) for k in served_keys(ARCHS, varlen=True)] + [(forward_tag(k), k) for k in forward]


def elf_sections(blob: bytes) -> dict[str, bytes]:
    """Section name -> contents of a 64-bit little-endian ELF: NOBITS sections as their size, symbol tables with
    each symbol's name spelled out in place of its string-table offset."""
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]

    def data(h):
        return blob[h[4]:h[4] + h[5]]

    def cstr(table: bytes, off: int) -> bytes:
        return table[off:table.index(b"\0", off)]

    names = data(headers[shstrndx])
    out = {}
    for h in headers:
        name = cstr(names, h[0]).decode()
        if h[1] == 8:       # NOBITS
            out[name] = f"nobits {h[5]}".encode()
        elif h[1] == 2:     # SYMTAB: 24-byte entries, st_name an offset into the linked string table
            strings, raw = data(headers[h[6]]), data(h)
            out[name] = b"".join(cstr(strings, struct.unpack_from("<I", raw, i)[0]) + b"\0" + raw[i + 4:i + 24]
                                 for i in range(0, len(raw), 24))
        else:
            out[name] = data(h)
    return out


def code_digest(blob: bytes, forward: bool = False) -> str:
    """Digest of the cubin's sections, each kernel's mangled name replaced by its role (see the top); the string
    tables, which only spell names, are left out (the symbol tables spell theirs in place)."""
    from frost.kernels.backward.compile import kernel_role

    sections = elf_sections(blob)
    names = {n.split(".")[-1] for n in sections if ".kernel_cutlass_kernel_" in n}
    roles = {n: "forward" if forward else kernel_role(n) for n in names}
    h = hashlib.sha256()
    for name in sorted(n for n in sections if n not in (".strtab", ".shstrtab")):
        data = sections[name]
        for mangled, role in roles.items():
            name = name.replace(mangled, role)
            data = data.replace(mangled.encode(), role.encode())
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def digest(item) -> tuple[str, dict]:
    """Child process: compile one set and return its tag and digests."""
    from frost.kernels.backward.compile import compile_kernels
    from frost.kernels.backward.select import tile_key
    from frost.kernels.forward.compile import compile_forward_kernel
    from frost.kernels.forward.select import ForwardKey

    tag, key = item
    if isinstance(key, ForwardKey):
        blob = compile_forward_kernel(key, keep_cubin=True).cubin
        return tag, {"raw": hashlib.sha256(blob).hexdigest(), "code": code_digest(blob, forward=True),
                     "bytes": len(blob), "tile": str(key.tile)}
    blob = compile_kernels(key, keep_cubin=True).cubins["backward"]
    return tag, {"raw": hashlib.sha256(blob).hexdigest(), "code": code_digest(blob), "bytes": len(blob),
                 "tile": tile_key(key.tile), "ptxas": key.ptxas_options}


def compare(before_path: str, after_path: str) -> int:
    with open(before_path) as f:
        before = json.load(f)
    with open(after_path) as f:
        after = json.load(f)
    missing = sorted(set(before) ^ set(after))
    raw = [t for t in sorted(set(before) & set(after)) if before[t]["raw"] != after[t]["raw"]]
    code = [t for t in raw if before[t]["code"] != after[t]["code"]]
    same = len(set(before) & set(after)) - len(raw)
    print(f"{len(before)} sets before, {len(after)} after: {same} byte-identical, {len(raw) - len(code)} differ "
          f"only in kernel names, {len(code)} differ in code, {len(missing)} on one side only")
    for t in code:
        print(f"CODE DIFFERS {t}: {before[t]} -> {after[t]}")
    for t in missing:
        print(f"ONE SIDE ONLY {t}")
    return 1 if code or missing else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="keep the sets whose tag contains TEXT (repeatable; default: every served set)")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        ap.error("give OUT.json or --compare BEFORE AFTER")
    items = [(tag, key) for tag, key in served_sets() if not args.only or any(o in tag for o in args.only)]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        digests = dict(pool.map(digest, items))
    with open(args.out, "w") as f:
        json.dump(digests, f, indent=1, sort_keys=True)
    print(f"{len(digests)} sets -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
