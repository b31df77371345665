"""`frost bench`: frost's attention backward against its peers, in one process, on the same tensors.

Light on import (no torch, no cutlass): the CLI, the FLOP formula, the case tables and the report rendering are
usable and testable without a GPU; the backends import torch / frost kernels / flash_attn only when they run."""
