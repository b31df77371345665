"""The graph IR: pydantic models, validation, JSON, and a builder."""

from frost.ir.builder import (BackwardAttrs, ForwardAttrs, GraphBuilder, SdpaGrads, SdpaResult, sdpa_backward_graph,
                              sdpa_backward_varlen_graph, sdpa_forward_graph, sdpa_forward_varlen_graph)
from frost.ir.graph import Graph
from frost.ir.ops import (AttentionOp, GenericOp, SdpaBackwardOp, SdpaForwardInputs, SdpaForwardOp,
                          SdpaForwardOutputs, SdpaInputs, SdpaOp, SdpaOutputs)
from frost.ir.tensors import Ragged, TensorSpec, contiguous_strides, layout_strides

__all__ = ["Graph", "GraphBuilder", "SdpaGrads", "SdpaResult", "sdpa_backward_graph", "sdpa_forward_graph",
           "sdpa_backward_varlen_graph", "sdpa_forward_varlen_graph", "BackwardAttrs", "ForwardAttrs", "AttentionOp",
           "GenericOp", "SdpaBackwardOp", "SdpaForwardInputs", "SdpaForwardOp", "SdpaForwardOutputs", "SdpaInputs",
           "SdpaOp", "SdpaOutputs", "Ragged", "TensorSpec", "contiguous_strides", "layout_strides"]
