"""What shared memory an SM still gives a new CTA, without and with frost.bench.sm120_hold.SmemHold: one probe CTA
of each size is launched and reported resident or not within a short wait. Under a working hold the largest
resident probe is SM120's 99 KB.

    python3 benchmarks/check_smem_hold.py"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from frost.bench.sm120_hold import Holders, SmemHold  # noqa: E402
from frost.kernels.arch import detect_arch  # noqa: E402

SIZES_KB = (48, 64, 96, 99, 100, 104, 112, 120, 126, 160, 200, 226)


def largest_resident(arch: str, waiting: list) -> list[str]:
    """yes/no per probe size; a probe that did not start is told to end and kept in ``waiting`` (it can only start
    once the hold is gone, so waiting for it here would wait for the hold's own timeout)."""
    rows = []
    for kb in SIZES_KB:
        probe = Holders(kb * 1024, 1, 3.0, arch)
        started = probe.wait_resident(0.3)
        if started:
            probe.release()
        else:
            probe.let_go()
            waiting.append(probe)
        rows.append(f"{kb}K:{'yes' if started else 'no'}")
    return rows


def main() -> None:
    props = torch.cuda.get_device_properties(0)
    arch = detect_arch(0)
    print(props.name, "SMs", props.multi_processor_count, "smem/SM",
          getattr(props, "shared_memory_per_multiprocessor", "?"),
          "smem/block optin", getattr(props, "shared_memory_per_block_optin", "?"))
    waiting: list = []
    print("free:", " ".join(largest_resident(arch, waiting)))
    hold = SmemHold(max_seconds=60)
    print("hold bytes per SM:", hold.smem)
    with hold:
        print("resident holders:", hold.holders.resident() if hold.holders else 0)
        print("held:", " ".join(largest_resident(arch, waiting)))
        if hold.holders is not None:
            print("holder flags (release, timed out):", hold.holders.flags[:2].tolist())
    torch.cuda.synchronize()
    print("probes left waiting, now ended:", len(waiting))


if __name__ == "__main__":
    main()
