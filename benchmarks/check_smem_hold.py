"""What shared memory an SM still gives a new CTA, without and with frost.bench.sm120_hold.SmemHold: one probe CTA
of each size is launched (its kernel loaded before the hold) and reported with the time it took to start and its SM,
or as not started within a short wait. Under a working hold the largest probe that starts is SM120's 99 KB, on an
SM a holder sits on.

    python3 benchmarks/check_smem_hold.py"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from frost.bench.sm120_hold import Holders, SmemHold  # noqa: E402
from frost.kernels.arch import detect_arch  # noqa: E402

SIZES_KB = (48, 64, 96, 99, 100, 104, 112, 120, 126, 160, 200, 226)


def probe_rows(arch: str, waiting: list, wait_s: float, holder_sms: set[int]) -> list[str]:
    """Per probe size: the seconds it took to start and its SM ("held" when a holder sits on that SM), or "no" when
    it did not start within ``wait_s``; a probe that did not start is told to end and kept in ``waiting`` (it can
    only start once the hold is gone, so waiting for it here would wait for the hold's own timeout)."""
    rows = []
    for kb in SIZES_KB:
        t0 = time.monotonic()
        probe = Holders(kb * 1024, 1, 3.0, arch)
        started = probe.wait_resident(wait_s)
        if started:
            sm = probe.sms()[0]
            rows.append(f"{kb}K:{time.monotonic() - t0:.2f}s@sm{sm}{'(held)' if sm in holder_sms else ''}")
            probe.release()
        else:
            rows.append(f"{kb}K:no")
            probe.let_go()
            waiting.append(probe)
    return rows


def main() -> None:
    props = torch.cuda.get_device_properties(0)
    arch = detect_arch(0)
    print(props.name, "SMs", props.multi_processor_count, "smem/SM",
          getattr(props, "shared_memory_per_multiprocessor", "?"),
          "smem/block optin", getattr(props, "shared_memory_per_block_optin", "?"),
          "CUDA_MODULE_LOADING", os.environ.get("CUDA_MODULE_LOADING", "(default)"))
    waiting: list = []
    print("free:", " ".join(probe_rows(arch, waiting, 0.3, set())))
    hold = SmemHold(max_seconds=60)
    print("hold bytes per SM:", hold.smem)
    with hold:
        sms = hold.holders.sms() if hold.holders else []
        print("resident holders:", len(sms), "on", len(set(sms)), "distinct SMs")
        print("held (1 s each):", " ".join(probe_rows(arch, waiting, 1.0, set(sms))))
        if hold.holders is not None:
            later = hold.holders.sms()
            print("holders now:", len(later), "moved:", sum(a != b for a, b in zip(sms, later)),
                  "flags (release, timed out):", hold.holders.flags[:2].tolist())
    torch.cuda.synchronize()
    print("probes left waiting, now ended:", len(waiting))


if __name__ == "__main__":
    main()
