"""`attn_implementation="frost"` for HuggingFace transformers.

    import frost.integrations.transformers as frost_hf
    frost_hf.register()
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="frost")   # or
    model.set_attn_implementation("frost")

register() adds frost to transformers' AttentionInterface (the attention function every layer calls) and to its
AttentionMaskInterface (the function that builds each forward's masks). Both are needed: transformers gives an
implementation that has no mask function no mask at all, which would drop the padding silently."""

from __future__ import annotations

import transformers

from frost.integrations import check_transformers_version

check_transformers_version(transformers.__version__)

from frost.integrations.transformers.attention import frost_attention_forward  # noqa: E402
from frost.integrations.transformers.errors import (TransformersAdapterError,  # noqa: E402
                                                    UnsupportedAttentionMask, UnsupportedAttentionSetting)
from frost.integrations.transformers.mask import FrostMask, frost_mask  # noqa: E402

NAME = "frost"


def register(name: str = NAME) -> str:
    """Register frost's attention and mask functions under `name` in transformers' global interfaces; returns
    the name to pass as attn_implementation. Calling it again is harmless."""
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(name, frost_attention_forward)
    AttentionMaskInterface.register(name, frost_mask)
    return name


__all__ = ["register", "NAME", "frost_attention_forward", "frost_mask", "FrostMask", "TransformersAdapterError",
           "UnsupportedAttentionMask", "UnsupportedAttentionSetting"]
