"""What an attention call takes, declared once: every tensor by role (its caller names, dtype and shape in the
caller's dense and packed layouts, the op that reads or writes it, the feature it turns on), every option (its
caller name, its IR attribute, its kind), the mask (causal folded into a band once) and the rules several layers
share (GQA divisibility, the scale). Pure Python: the IR, the analyzer, the public API and the kernels' host side
all read it, and none of them repeats it.

Dims are named by letters: B (batches, or sequences of a packed call), Sq / Skv (padded sequence extents), Tq / Tkv
(packed tokens), Hq / Hkv (heads), Dqk / Dv (head dims); "B+1" is an offsets vector's extent."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Literal, Mapping, Optional

from frost.errors import TensorError

IoDtype = Literal["io", "float32", "int32"]
Kind = Literal["forward", "backward"]


@dataclass(frozen=True)
class TensorRole:
    """One tensor an attention op reads or writes. ``dense`` / ``packed``: its name in a caller's dense (BSHD) or
    packed (THD) call (None: absent from that layout); shapes are in the caller's order. ``reads`` / ``writes``: the
    op kinds that take it as an input or give it as an output. ``side``: the token axis a packed op splits it on.
    ``feature``: the Facts flag (and capability entry) that its presence sets."""

    role: str
    dense: Optional[str]
    packed: Optional[str]
    dtype: IoDtype
    dense_shape: tuple[str, ...]
    packed_shape: tuple[str, ...]
    reads: tuple[Kind, ...] = ()
    writes: tuple[Kind, ...] = ()
    optional: bool = False
    side: Optional[Literal["q", "kv"]] = None
    feature: Optional[str] = None
    meaning: str = ""
    packed_meaning: str = ""
    grad_of: Optional[str] = None         # an output that is the gradient of this input: its shape and dtype
    kernel_flag: int = 0                  # an optional tensor's bit in the kernels' runtime flags (its pointer is
    #                                       valid); a gradient output shares its input's bit

    def meaning_in(self, packed: bool) -> str:
        return self.packed_meaning if packed and self.packed_meaning else self.meaning

    def name(self, packed: bool) -> str:
        """The caller's name of this role in a dense or packed call."""
        return (self.packed if packed else self.dense) or self.role

    def shape(self, packed: bool) -> tuple[str, ...]:
        return self.packed_shape if packed else self.dense_shape

    def extents(self, dims: Mapping[str, int], packed: bool = False) -> tuple[int, ...]:
        """This role's shape in a call whose sizes are ``dims`` (by the letters of its shape, e.g. B, Hq, Sq)."""
        return tuple(dims[d] for d in self.shape(packed))


_FWD: tuple[Kind, ...] = ("forward",)
_BWD: tuple[Kind, ...] = ("backward",)
_BOTH: tuple[Kind, ...] = ("forward", "backward")

TENSORS: tuple[TensorRole, ...] = (
    TensorRole("q", "q", "q", "io", ("B", "Sq", "Hq", "Dqk"), ("Tq", "Hq", "Dqk"), reads=_BOTH, side="q"),
    TensorRole("k", "k", "k", "io", ("B", "Skv", "Hkv", "Dqk"), ("Tkv", "Hkv", "Dqk"), reads=_BOTH, side="kv"),
    TensorRole("v", "v", "v", "io", ("B", "Skv", "Hkv", "Dv"), ("Tkv", "Hkv", "Dv"), reads=_BOTH, side="kv",
               meaning="matching k"),
    TensorRole("o", "out", "out", "io", ("B", "Sq", "Hq", "Dv"), ("Tq", "Hq", "Dv"), reads=_BWD, writes=_FWD,
               side="q", meaning="from q and v"),
    TensorRole("do", "dout", "dout", "io", ("B", "Sq", "Hq", "Dv"), ("Tq", "Hq", "Dv"), reads=_BWD, side="q",
               meaning="the shape of out"),
    TensorRole("lse", "lse", "lse", "float32", ("B", "Hq", "Sq"), ("Hq", "Tq"), reads=_BWD, writes=_FWD, side="q",
               packed_meaning="head-major or token-major in memory (a (Tq, Hq) buffer: pass lse.t())"),
    TensorRole("dlse", "dlse", "dlse", "float32", ("B", "Hq", "Sq"), ("Hq", "Tq"), reads=_BWD, optional=True,
               side="q", feature="has_dlse", kernel_flag=64, meaning="the shape of lse",
               packed_meaning="the shape of lse, either memory order"),
    TensorRole("sink", "sink", "sink", "float32", ("Hq",), ("Hq",), reads=_BOTH, optional=True,
               feature="has_sink", kernel_flag=16, meaning="one per query head"),
    TensorRole("seq_len_q", "seq_len_q", "seqused_q", "int32", ("B",), ("B",), reads=_BOTH, optional=True,
               feature="has_padding_q", kernel_flag=1, meaning="one length per batch entry"),
    TensorRole("seq_len_kv", "seq_len_kv", "seqused_kv", "int32", ("B",), ("B",), reads=_BOTH, optional=True,
               feature="has_padding_kv", kernel_flag=2, meaning="one length per batch entry"),
    TensorRole("cu_seqlens_q", None, "cu_seqlens_q", "int32", (), ("B+1",), reads=_BOTH, feature="varlen",
               meaning="sequence b owns query tokens [cu_seqlens_q[b], cu_seqlens_q[b + 1])"),
    TensorRole("cu_seqlens_kv", None, "cu_seqlens_kv", "int32", (), ("B+1",), reads=_BOTH, feature="varlen",
               meaning="the shape of cu_seqlens_q (one kv sequence per query sequence)"),
    TensorRole("dq", "dq", "dq", "io", ("B", "Sq", "Hq", "Dqk"), ("Tq", "Hq", "Dqk"), writes=_BWD, side="q",
               grad_of="q"),
    TensorRole("dk", "dk", "dk", "io", ("B", "Skv", "Hkv", "Dqk"), ("Tkv", "Hkv", "Dqk"), writes=_BWD, side="kv",
               grad_of="k"),
    TensorRole("dv", "dv", "dv", "io", ("B", "Skv", "Hkv", "Dv"), ("Tkv", "Hkv", "Dv"), writes=_BWD, side="kv",
               grad_of="v"),
    TensorRole("dsink", "dsink", "dsink", "float32", ("Hq",), ("Hq",), writes=_BWD, optional=True,
               feature="has_sink", grad_of="sink", kernel_flag=16),
)
ROLES: dict[str, TensorRole] = {t.role: t for t in TENSORS}
IO_ROLES: tuple[str, ...] = tuple(t.role for t in TENSORS if t.dtype == "io")   # (B, S, H, D) / (T, H, D) tensors
SIDE_ROLES: tuple[str, ...] = tuple(t.role for t in TENSORS if t.dtype != "io")
OFFSETS: tuple[str, ...] = ("cu_seqlens_q", "cu_seqlens_kv")


def inputs(kind: Kind, packed: bool) -> tuple[TensorRole, ...]:
    """The tensors an op of ``kind`` reads, in a dense or packed call (offsets only in a packed one)."""
    return tuple(t for t in TENSORS if kind in t.reads and (packed or t.role not in OFFSETS))


def outputs(kind: Kind) -> tuple[TensorRole, ...]:
    return tuple(t for t in TENSORS if kind in t.writes)


def role_names(roles: tuple[TensorRole, ...], optional: Optional[bool] = None) -> tuple[str, ...]:
    """The roles' names (only the optional or only the required ones, when ``optional`` says which)."""
    return tuple(t.role for t in roles if optional is None or t.optional == optional)


def features(ports: object) -> dict[str, bool]:
    """Facts flag -> whether an op's ports (its inputs model, or any object with the role attributes) give the
    optional input that sets it: has_sink, has_padding_q, has_padding_kv, has_dlse."""
    return {t.feature: getattr(ports, t.role, None) is not None
            for t in TENSORS if t.optional and t.feature is not None and t.reads}


def optional_ports(kind: Kind, inputs: object, outputs: object) -> dict[str, str]:
    """Role -> graph tensor name of the optional tensors an op of ``kind`` reads (from its inputs model) or writes
    (from its outputs model) and this op has: the keyword arguments an engine passes on to its kernel."""
    ports = [(t.role, inputs) for t in TENSORS if t.optional and kind in t.reads]
    ports += [(t.role, outputs) for t in TENSORS if t.optional and kind in t.writes]
    return {role: name for role, model in ports if (name := getattr(model, role, None)) is not None}


def kernel_optional(kind: Kind) -> tuple[TensorRole, ...]:
    """The optional tensors an op of ``kind`` reads or writes, in the order the kernels take their pointers: by
    kernel flag bit, a gradient output right after its input (forward: seq_len_q, seq_len_kv, sink; backward: those,
    dsink, dlse)."""
    roles = [t for t in TENSORS if t.optional and (kind in t.reads or kind in t.writes)]
    return tuple(sorted(roles, key=lambda t: (t.kernel_flag, t.grad_of is not None)))


def kernel_flag(role: str) -> int:
    """The kernels' runtime flag bit of an optional tensor (its pointer is valid)."""
    return ROLES[role].kernel_flag


def caller_name(role: str, packed: bool = False) -> str:
    """The caller's name of an IR role (o -> out, do -> dout; a packed call's seq_len_q -> seqused_q)."""
    spec = ROLES.get(role)
    return spec.name(packed) if spec is not None else role


@dataclass(frozen=True)
class InputFeature:
    """What an optional input turns on, as every layer above the kernels names it: the Facts flag its presence sets,
    the Capability flag that offers it, its tag in compile keys and a report's facts line, its support-matrix row,
    and the decline rule an engine without it gives (what it accepts instead, one line for the matrix)."""

    facts: str
    capability: str
    tag: str
    row: dict[Kind, str]
    accepted: str
    declined: str


INPUT_FEATURES: tuple[InputFeature, ...] = (
    InputFeature("has_padding_q", "padding", "padq", {"backward": "Padding (seq_len_q / seq_len_kv)",
                                                       "forward": "Padding (seq_len_q / seq_len_kv)"},
                 "no seq_len_q tensor (pack or unpad the batch)", "per-batch query lengths (seq_len_q) are not served"),
    InputFeature("has_padding_kv", "padding", "padkv", {}, "no seq_len_kv tensor (pack or unpad the batch)",
                 "per-batch key/value lengths (seq_len_kv) are not served"),
    InputFeature("has_sink", "sink", "sink", {"backward": "Sink + dsink", "forward": "Sink"}, "no sink input",
                 "a learnable attention sink (and its dsink gradient) is not served"),
    InputFeature("has_dlse", "dlse", "dlse", {"backward": "LSE gradient (dlse)"},
                 "no dlse input (a loss that does not use the forward's LSE)",
                 "a gradient on the forward's LSE output (dlse) is not served"),
)

# ---- options --------------------------------------------------------------------------------------------------

OptionKind = Literal["scale", "bool", "optional_bool", "alignment", "window", "host_int"]


@dataclass(frozen=True)
class Option:
    """One non-tensor argument of the public calls: its caller name, the IR attribute it becomes (None: none),
    its kind (what the argument gate accepts) and the accepted values in words."""

    name: str
    ir: Optional[str]
    kind: OptionKind
    accepted: str


Alignment = Literal["top_left", "bottom_right"]
ALIGNMENTS: tuple[Alignment, ...] = ("top_left", "bottom_right")
FP32_MAX = 3.4028234663852886e38
SCALE_ACCEPTED = "a float > 0 that fp32 holds (at most 3.4e38: the kernels and the reference scale in fp32)"


OPTIONS: tuple[Option, ...] = (
    Option("softmax_scale", "attn_scale", "scale", f"None (1/sqrt(head dim of q)) or {SCALE_ACCEPTED}"),
    Option("causal", "causal", "bool", "True or False"),
    Option("window_size", None, "window", "a pair (left, right), each None or an int (negative: unbounded)"),
    Option("causal_alignment", "alignment", "alignment", " or ".join(repr(a) for a in ALIGNMENTS)),
    Option("deterministic", "deterministic", "optional_bool",
           "True, False or None (follow torch.are_deterministic_algorithms_enabled())"),
    Option("return_lse", None, "bool", "True or False"),
    Option("max_seqlen_q", None, "host_int", "a host int >= 0, the longest sequence (it sizes the grid)"),
    Option("max_seqlen_kv", None, "host_int", "a host int >= 0, the longest sequence (it sizes the grid)"),
)
OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}
# IR attribute -> how the caller spells it (the band's bounds are window_size's two entries)
IR_NAMES: dict[str, str] = {**{o.ir: o.name for o in OPTIONS if o.ir}, "band_left": "window_size[0]",
                            "band_right": "window_size[1]"}


# ---- shared rules ---------------------------------------------------------------------------------------------

def heads_divide(heads_q: int, heads_kv: int) -> bool:
    """GQA / MQA: every kv head serves a whole group of query heads (query head h reads kv head h // (Hq / Hkv))."""
    return heads_kv >= 1 and heads_q >= 1 and heads_q % heads_kv == 0


def gqa_accepted(heads_q: int, name: str = "Hq") -> str:
    """What a kv head count may be, for ``heads_q`` query heads (``name``: how the caller calls them)."""
    return f"a divisor of {name} = {heads_q} (query heads per kv head must be whole)"


def valid_scale(scale: object) -> bool:
    """None (the default 1/sqrt(Dqk)) or a real in (0, FP32_MAX]; a bool is not a scale. A larger one would be
    inf in fp32 and turn every output into NaN."""
    if scale is None:
        return True
    if isinstance(scale, bool) or not isinstance(scale, Real):
        return False
    try:
        value = float(scale)
    except OverflowError:   # an int past any float
        return False
    return math.isfinite(value) and 0 < value <= FP32_MAX


def resolved_scale(scale: Optional[float], head_dim_qk: int) -> float:
    return float(scale) if scale is not None else 1.0 / math.sqrt(head_dim_qk) if head_dim_qk else 1.0


# ---- the mask -------------------------------------------------------------------------------------------------

MaskKind = Literal["none", "causal", "band"]
BOUND_ACCEPTED = "None (unbounded) or an integer >= 0"


def as_int(value: object) -> Optional[int]:
    """``value`` as an int when it is an integer (Python or numpy), else None. A bool is an int to Python but never
    a size or a bound; a float, a string or a tensor is never read as one (no truncation, parsing or read-back)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        return None
    return int(value)


def valid_bound(bound: object) -> bool:
    """A mask bound: None (unbounded) or an int >= 0 (a numpy integer too; never a bool)."""
    if bound is None:
        return True
    n = as_int(bound)
    return n is not None and n >= 0


@dataclass(frozen=True)
class Mask:
    """The attention mask, decided once: query row i keeps keys j in [diag - left, diag + right] (None: unbounded on
    that side), diag = i (top_left) or i + skv - sq (bottom_right). Every layer below the caller's arguments (the
    IR op's attributes, Facts, the plans, the kernels' host side, the reference) carries this one value.
    ``Mask.of`` folds ``causal`` in, here only: it bounds the right side at 0 unless a right bound is given (a
    larger one widens it)."""

    left: Optional[int] = None
    right: Optional[int] = None
    alignment: Alignment = "top_left"

    def __post_init__(self) -> None:
        for name, bound in (("left", self.left), ("right", self.right)):
            if not valid_bound(bound):
                raise ValueError(f"Mask.{name}: got {bound!r}; accepted: {BOUND_ACCEPTED}")
        if self.alignment not in ALIGNMENTS:
            raise ValueError(f"Mask.alignment: got {self.alignment!r}; accepted: one of {ALIGNMENTS}")

    @classmethod
    def of(cls, causal: bool, left: Optional[int] = None, right: Optional[int] = None,
           alignment: Alignment = "top_left") -> "Mask":
        return cls(left, 0 if causal and right is None else right, alignment)

    @property
    def kind(self) -> MaskKind:
        if self.left is None and self.right is None:
            return "none"
        if self.left is None and self.right == 0:
            return "causal"
        return "band"

    def keywords(self) -> dict[str, object]:
        """The mask keywords of the direct calls (the kernels', the reference's) that give this mask."""
        return dict(causal=False, alignment=self.alignment, band_left=self.left, band_right=self.right)

    def __str__(self) -> str:
        return "none" if self.kind == "none" else f"{self.kind}({self.left}, {self.right}) {self.alignment}"


def caller_mask(causal: object, alignment: object, band_left: object, band_right: object) -> Mask:
    """The Mask of a direct call's mask keywords (the kernels' and the reference's calls); a TensorError names the
    keyword that is wrong, its value and what is accepted."""
    if alignment not in ALIGNMENTS:
        raise TensorError("alignment", alignment, " or ".join(repr(a) for a in ALIGNMENTS))
    for name, bound in (("band_left", band_left), ("band_right", band_right)):
        if not valid_bound(bound):
            raise TensorError(name, bound, BOUND_ACCEPTED)
    if not isinstance(causal, bool):
        raise TensorError("causal", causal, OPTION["causal"].accepted)
    left, right = (as_int(b) for b in (band_left, band_right))
    return Mask.of(causal, left, right, alignment)


__all__ = ["ALIGNMENTS", "BOUND_ACCEPTED", "Mask", "INPUT_FEATURES", "IO_ROLES", "InputFeature", "features",
           "role_names", "IR_NAMES", "OFFSETS", "OPTION", "OPTIONS", "Option", "ROLES", "SIDE_ROLES", "TENSORS",
           "TensorRole", "as_int", "caller_mask", "caller_name", "kernel_flag", "kernel_optional", "gqa_accepted",
           "heads_divide", "inputs", "optional_ports", "outputs", "resolved_scale", "valid_bound", "valid_scale",
           "FP32_MAX", "SCALE_ACCEPTED"]
