"""Ops of the graph: the attention ops frost serves (sdpa_forward, sdpa_backward), and a generic op for everything
else."""

from __future__ import annotations

import difflib
import math
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, ConfigDict, Discriminator, Field, StrictBool, StrictFloat, StrictInt, Tag,
                      ValidationInfo, field_validator, model_validator)

from frost.errors import GraphError, UnknownOp
from frost.spec import Alignment, Kind, Mask

STRUCTURED_OPS: tuple[str, ...] = ("sdpa_backward", "sdpa_forward")   # op kinds with named inputs frost serves


class SdpaInputs(BaseModel):
    """Tensor names read by the op; the optional ones are None when absent."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    q: str
    k: str
    v: str
    o: str
    do: str
    lse: str
    sink: str | None = None
    dlse: str | None = None   # gradient flowing into the forward's LSE output (fp32, like lse); None: zero
    seq_len_q: str | None = None     # per-batch valid lengths; in a ragged op, per-sequence (seqused)
    seq_len_kv: str | None = None
    cu_seqlens_q: str | None = None  # int32 (B + 1,) offsets of a ragged op's packed sequences; None: dense
    cu_seqlens_kv: str | None = None


class SdpaOutputs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    dq: str
    dk: str
    dv: str
    dsink: str | None = None


class SdpaForwardInputs(BaseModel):
    """Tensor names the forward reads; the optional ones are None when absent."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    q: str
    k: str
    v: str
    sink: str | None = None
    seq_len_q: str | None = None
    seq_len_kv: str | None = None
    cu_seqlens_q: str | None = None
    cu_seqlens_kv: str | None = None


class SdpaForwardOutputs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    o: str
    lse: str


class SdpaOp(BaseModel):
    """What every attention op shares: its name, ports, scale and mask. Mask: keep key j iff j in
    [diag - band_left, diag + band_right] (None = unbounded); causal means band_right defaults to 0 (a larger
    band_right widens it). diag = i (top_left) or i + skv - sq. Subclasses narrow `op`, `inputs` and `outputs` to
    their own port models (their fields keep this order in JSON); here they are either op's, so what both ops have
    (q, k, v, sink, the lengths and offsets) reads the same on any attention op."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    op: str
    name: str = Field(min_length=1)
    inputs: SdpaInputs | SdpaForwardInputs
    outputs: SdpaOutputs | SdpaForwardOutputs
    attn_scale: StrictFloat | None = None
    causal: StrictBool = False
    alignment: Alignment = "top_left"
    band_left: StrictInt | None = None
    band_right: StrictInt | None = None

    @property
    def kind(self) -> Kind:
        """"forward" or "backward": the op kind's name in frost.spec (which inputs it reads, which it writes)."""
        return "forward" if self.op == "sdpa_forward" else "backward"

    @property
    def mask(self) -> Mask:
        """The mask these attributes describe, `causal` folded in (frost.spec.Mask)."""
        return Mask.of(self.causal, self.band_left, self.band_right, self.alignment)

    @property
    def ragged(self) -> bool:
        """Packed variable-length sequences: the op's q-side and kv-side tensors are ragged over cu_seqlens."""
        return self.inputs.cu_seqlens_q is not None

    def input_names(self) -> list[str]:
        return [n for n in self.inputs.model_dump().values() if n is not None]

    def output_names(self) -> list[str]:
        return [n for n in self.outputs.model_dump().values() if n is not None]


class SdpaBackwardOp(SdpaOp):
    """Attention backward: dq, dk, dv (and dsink with a sink) from q, k, v, the forward's o and lse, and do."""

    op: Literal["sdpa_backward"] = "sdpa_backward"
    inputs: SdpaInputs
    outputs: SdpaOutputs
    deterministic: StrictBool = False


class SdpaForwardOp(SdpaOp):
    """Attention forward: o (B, Hq, Sq, Dv) in the io dtype and lse (B, Hq, Sq) fp32, natural log, including the
    sink term (the o and lse an sdpa_backward reads)."""

    op: Literal["sdpa_forward"] = "sdpa_forward"
    inputs: SdpaForwardInputs
    outputs: SdpaForwardOutputs


class GenericOp(BaseModel):
    """Any other node of a user graph. frost does not claim it; the analyzer reports it as unclaimed."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    op: str = Field(min_length=1)
    name: str = Field(min_length=1)
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    attrs: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _not_a_misspelt_structured_op(cls, value: Any) -> Any:
        """A kind one letter from a structured op's, or a structured op's named (dict) inputs or outputs under
        another kind, is a mistake: say so instead of failing on the inputs' type."""
        if isinstance(value, dict) and isinstance(value.get("op"), str):
            kind = value["op"]
            named_ports = any(isinstance(value.get(port), dict) for port in ("inputs", "outputs"))
            if named_ports or difflib.get_close_matches(kind, STRUCTURED_OPS, n=1, cutoff=0.85):
                raise UnknownOp(kind, STRUCTURED_OPS, "any other op kind is a generic node with lists of inputs "
                                "and outputs")
        return value

    @field_validator("attrs")
    @classmethod
    def _json_attrs(cls, attrs: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """Held as JSON will read them back (tuples become lists), so a graph's JSON round trip is the identity;
        what JSON cannot hold (NaN, infinities, other types) is refused instead of silently changed."""
        where = f"op {info.data.get('name', '?')!r} attrs"
        return {k: _json_value(v, f"{where}[{k!r}]") for k, v in attrs.items()}

    def input_names(self) -> list[str]:
        return list(self.inputs)

    def output_names(self) -> list[str]:
        return list(self.outputs)


def _json_value(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise GraphError(where, value, "a finite number (JSON has no NaN or infinity)")
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise GraphError(f"{where} key", bad[0], "a str (JSON object keys are strings)")
        return {k: _json_value(v, f"{where}[{k!r}]") for k, v in value.items()}
    raise GraphError(where, type(value).__name__,
                     "a JSON value: str, int, finite float, bool, None, or lists and dicts of them")


def _op_tag(value: Any) -> str:
    kind = value.get("op") if isinstance(value, dict) else getattr(value, "op", None)
    return kind if kind in STRUCTURED_OPS else "generic"


AttentionOp = Union[SdpaBackwardOp, SdpaForwardOp]   # the attention ops, for code that reads either one

Op = Annotated[
    Union[Annotated[SdpaBackwardOp, Tag("sdpa_backward")], Annotated[SdpaForwardOp, Tag("sdpa_forward")],
          Annotated[GenericOp, Tag("generic")]],
    Discriminator(_op_tag),
]
