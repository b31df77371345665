"""Workspace layout: named regions packed into one caller-owned byte buffer.

The plan knows the layout (and so `workspace_size`) before execute, so a caller can allocate the buffer once and
pass it to every call: execute then allocates nothing, which is what CUDA-graph capture needs."""

from __future__ import annotations

from dataclasses import dataclass

ALIGN = 256  # bytes; every region (and the buffer itself) starts on this boundary


@dataclass(frozen=True)
class Region:
    name: str
    offset: int
    nbytes: int


@dataclass(frozen=True)
class WorkspaceLayout:
    regions: tuple[Region, ...] = ()
    size: int = 0

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(name)


def align_up(n: int, align: int = ALIGN) -> int:
    return (n + align - 1) // align * align


def pack(requests: list[tuple[str, int]]) -> WorkspaceLayout:
    """Lay `requests` (name, nbytes) out in order, each region 256-byte aligned; names must be unique."""
    regions, offset = [], 0
    seen: set[str] = set()
    for name, nbytes in requests:
        if name in seen:
            raise ValueError(f"workspace region {name!r} requested twice")
        seen.add(name)
        regions.append(Region(name, offset, int(nbytes)))
        offset = align_up(offset + int(nbytes))
    return WorkspaceLayout(tuple(regions), offset)


class RegionView:
    """One region of a workspace buffer as an engine sees it: its address, and its bytes as a tensor view made only
    when asked for. The kernels need only addresses, and slicing a tensor costs several microseconds of host time
    per region, which a call that allocates its workspace (the functional API) would pay every time."""

    __slots__ = ("buffer", "offset", "nbytes", "_address")

    def __init__(self, buffer, offset: int, nbytes: int, base: int):
        self.buffer, self.offset, self.nbytes, self._address = buffer, offset, nbytes, base + offset

    def data_ptr(self) -> int:
        return self._address

    def tensor(self):
        """The region's bytes: a uint8 view of the buffer (no copy)."""
        return self.buffer[self.offset:self.offset + self.nbytes]

    def zero_(self) -> "RegionView":
        self.tensor().zero_()
        return self


def carve(buffer, regions: tuple[Region, ...], skip: int = 0) -> dict[str, RegionView]:
    """The regions of `buffer` (a 1-D uint8 tensor), the layout starting ``skip`` bytes in; nothing is allocated
    or sliced."""
    base = buffer.data_ptr()
    return {r.name: RegionView(buffer, skip + r.offset, r.nbytes, base) for r in regions}
