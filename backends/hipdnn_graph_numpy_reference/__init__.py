"""The NumPy reference backend: the executable definition of every node's math.

Registered through the entry point ``numpy`` in the group ``hipdnn_graph.backends``, exactly as a
third-party plugin would be.
"""

from .engine import NumpyReferenceBackend, NumpyReferenceEngine, NumpyReferencePlan

__all__ = ["NumpyReferenceBackend", "NumpyReferenceEngine", "NumpyReferencePlan", "create_backend"]


def create_backend() -> NumpyReferenceBackend:
    """Entry-point factory of the ``numpy`` backend."""
    return NumpyReferenceBackend()
