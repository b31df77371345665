"""frost: attention (SDPA) backward graphs compiled to CuTe-DSL kernels for SM120-class GPUs."""

from frost.errors import FrostError, GraphError, NotSupported, TensorError
from frost.ir import Graph, GraphBuilder, TensorSpec, sdpa_backward_graph

__version__ = "0.1.0"

__all__ = ["FrostError", "GraphError", "NotSupported", "TensorError", "Graph", "GraphBuilder", "TensorSpec",
           "sdpa_backward_graph", "__version__"]
