"""The reference engine: attention forward and backward in plain torch, for every feature of the math
contract (GQA/MQA, causal and band masks in both alignments, per-batch padding, sink), dense or packed
(variable-length sequences over cu_seqlens, frost.reference.varlen).

It is the CPU default engine and, in fp64, the oracle every other engine is tested against. Work is split
into query-row blocks so memory stays O(B·Hq·rows·Skv), never B·Hq·Sq·Skv."""

from frost.reference.backward import attention_backward
from frost.reference.blocks import DEFAULT_BLOCK_ROWS, MAX_BLOCK_ELEMENTS, block_rows_for
from frost.reference.forward import attention_forward
from frost.reference.varlen import attention_backward_varlen, attention_forward_varlen

__all__ = ["attention_forward", "attention_backward", "attention_forward_varlen", "attention_backward_varlen",
           "block_rows_for", "DEFAULT_BLOCK_ROWS", "MAX_BLOCK_ELEMENTS"]
