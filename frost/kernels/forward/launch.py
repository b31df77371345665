"""The forward's hot path. What a plan fixes for every call (the scale and the mask) is packed once into a
BoundForward; a call then only reads pointers, sizes and strides off its tensors (one ForwardTensors) and calls the
compiled kernel once (kernel.FwdKernel through TVM-FFI: pointers as ints, the stream as a raw handle; see
compile.py). BoundForward.arguments is the one place a call's tensors and the plan's values become that entry's
flat argument list.

A BoundForward checks nothing and decides nothing: it runs the kernel its config's key names, and its caller has
checked the tensors (CompiledForward.__call__ does, through checks.py; the engine relies on the lowering's
executor, which checks every tensor against the plan before it runs the engine)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, NamedTuple

from frost.kernels import optional_inputs
from frost.kernels.strides import htd_strides, strides_reader

if TYPE_CHECKING:
    from frost.kernels.forward.api import ForwardConfig
    from frost.kernels.packed import Packed


class ForwardTensors(NamedTuple):
    """The memory of one forward call: q, k, v, the outputs o and lse, and the optional inputs given, by frost.spec
    role (per-batch lengths, a packed call's seqused; a sink). Dense tensors are logical (B, H, S, D) with lse
    (B, Hq, Sq); a packed call's are (H, T, D) with lse (Hq, Tq). A NamedTuple: immutable, and cheap enough to
    build on every call."""
    q: object
    k: object
    v: object
    o: object
    lse: object
    optional: Mapping[str, object] = optional_inputs.NONE
    packed: Packed | None = None   # a packed call's segments (their prefix sums and max_seqlens are read)


@dataclass(frozen=True)
class BoundForward:
    """``bound(tensors, stream=None)`` enqueues the forward of one call's ForwardTensors (nothing for an empty
    problem: rows past Sq are not written)."""
    launch: object          # the compiled host entry
    cfg: ForwardConfig
    scale_log2: float
    bounds: tuple[int, int]  # the mask's runtime bounds (mask.runtime_bounds)
    flags: int              # the mask's flags; the optional inputs' flags are added per call

    def __call__(self, tensors: ForwardTensors, stream=None, seq_major: bool = False) -> None:
        """``seq_major``: q, k, v and o are given in (B, S, H, D) order, a packed call's in (T, H, D) order (lse
        as always), not as logical views (kernels.strides)."""
        args = self.arguments(tensors, seq_major)
        if args is None:
            return
        device = tensors.q.get_device()
        s = _current_stream(device) if stream is None else _raw_stream(stream)
        with _device_guard(device):
            self.launch(*args, s)

    def arguments(self, t: ForwardTensors, seq_major: bool = False) -> tuple | None:
        """kernel.FwdKernel's arguments but the stream, in its order: the tensors' pointers, the sizes, the strides
        (a packed call's batch stride 0), the scale and the mask; None for a problem with nothing to compute.
        Absent optional inputs get a stand-in address (never dereferenced: their flag is off)."""
        q, k, v, o, lse, optional, packed = t
        st = strides_reader(self.cfg.varlen, seq_major)
        head_axis = int(seq_major)     # the head axis after the batch axis: (B, H, S) / (H, T), or (B, S, H) / (T, H)
        if self.cfg.varlen:   # each batch's segment from packed.cu_seqlens_*
            heads, heads_kv = q.shape[head_axis], k.shape[head_axis]
            tokens_q, tokens_kv = q.shape[1 - head_axis], k.shape[1 - head_axis]
            if packed.batch == 0 or heads == 0 or packed.max_seqlen_q == 0 or tokens_q == 0:
                return None
            sizes = (packed.batch, heads, heads_kv, packed.max_seqlen_q, packed.max_seqlen_kv,
                     self.cfg.head_dim_qk, self.cfg.head_dim_v, tokens_q, tokens_kv)
            lse_strides = htd_strides(lse)
        else:
            batch, heads, heads_kv = q.shape[0], q.shape[1 + head_axis], k.shape[1 + head_axis]
            seq_q, seq_kv = q.shape[2 - head_axis], k.shape[2 - head_axis]
            if batch == 0 or heads == 0 or seq_q == 0:
                return None
            sizes = (batch, heads, heads_kv, seq_q, seq_kv, self.cfg.head_dim_qk, self.cfg.head_dim_v, 0, 0)
            lse_strides = lse.stride()
        strides = (*st(q), *st(k), *st(v), *st(o), *lse_strides)
        stand_in = lse.data_ptr()
        optional_flags, optional_pointers = optional_inputs.flags_and_pointers("forward", optional, stand_in)
        flags = self.flags | optional_flags
        return (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), *optional_pointers,
                stand_in if packed is None else packed.cu_seqlens_q.data_ptr(),
                stand_in if packed is None else packed.cu_seqlens_kv.data_ptr(),
                *sizes, *strides, self.scale_log2, *self.bounds, flags)


def _raw_stream(stream) -> int:
    """A torch.cuda.Stream (or anything with .cuda_stream), a cuda.CUstream or a raw handle."""
    handle = getattr(stream, "cuda_stream", None)
    return int(stream) if handle is None else handle


def _current_stream(device: int) -> int:
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream


def _device_guard(device: int):
    import torch

    return torch.cuda.device(device)
