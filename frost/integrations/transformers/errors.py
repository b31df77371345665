"""Typed errors of the transformers adapter: what a model asked for that frost cannot compute exactly."""

from __future__ import annotations

import torch

from frost.errors import FrostError, _fmt


class TransformersAdapterError(FrostError):
    """Base of the adapter's errors; names the argument as transformers spells it, the value and what works."""

    def __init__(self, subject: str, value: object, accepted: str, detail: str = "") -> None:
        self.subject, self.value, self.accepted = subject, value, accepted
        self.args = (_fmt(subject, value, accepted, detail),)   # as frost.errors.FrostError says why


class UnsupportedAttentionMask(TransformersAdapterError):
    """A mask frost cannot express (left padding, an arbitrary 4-D mask, packing it cannot serve, a custom mask
    function): raised instead of running attention with a mask that differs from the model's."""


class UnsupportedAttentionSetting(TransformersAdapterError):
    """An attention option frost does not implement (dropout > 0, softcap, a position bias, ...)."""


def describe_value(value: object) -> str:
    """A short description of an argument for an error message: a tensor's rank, dtype and shape, else its repr."""
    if isinstance(value, torch.Tensor):
        return f"a {value.dim()}-D {str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)}"
    return repr(value)
