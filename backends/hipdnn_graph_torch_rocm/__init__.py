"""The torch backend (entry point ``torch``): SDPA engines on torch's fused kernels (ROCm and
CUDA builds) plus a chunked math engine that runs everywhere.

torch is imported lazily (only when an engine checks or runs a graph), so loading the plugin
and ``import hipdnn_graph`` stay light.
"""

from .engines import ENGINES, TorchSdpaBackend, TorchSdpaEngine, create_engines

__all__ = ["ENGINES", "TorchSdpaBackend", "TorchSdpaEngine", "create_backend", "create_engines"]


def create_backend() -> TorchSdpaBackend:
    """Entry-point factory of the ``torch`` backend."""
    return TorchSdpaBackend()
