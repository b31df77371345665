"""The graph IR: pydantic models, validation, JSON, and a builder."""

from frost.ir.builder import GraphBuilder, SdpaGrads, sdpa_backward_graph
from frost.ir.graph import Graph
from frost.ir.ops import GenericOp, SdpaBackwardOp, SdpaInputs, SdpaOutputs
from frost.ir.tensors import TensorSpec, contiguous_strides, layout_strides

__all__ = ["Graph", "GraphBuilder", "SdpaGrads", "sdpa_backward_graph", "GenericOp", "SdpaBackwardOp",
           "SdpaInputs", "SdpaOutputs", "TensorSpec", "contiguous_strides", "layout_strides"]
