"""The torch backend (entry point ``torch``): SDPA engines on torch's fused kernels (ROCm and
CUDA builds) plus a chunked math engine that runs everywhere.

Nothing heavy is imported with the package: the engines (and with them ``hipdnn_graph``, so
pydantic) load on first use, through :func:`create_backend` or the names below, and torch only
when an engine checks or runs a graph. So ``import hipdnn_graph`` stays light, and the torch
kernels under :mod:`hipdnn_graph_torch_rocm.kernels` import with torch alone (no pydantic, no
``hipdnn_graph``).

Example:
    >>> import hipdnn_graph_torch_rocm as tr
    >>> backend = tr.create_backend()
    >>> [e.name for e in backend.engines()][-1]
    'TORCH_SDPA_MATH_ENGINE'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._engines import ENGINES, TorchSdpaBackend, TorchSdpaEngine, create_engines

__all__ = ["ENGINES", "TorchSdpaBackend", "TorchSdpaEngine", "create_backend", "create_engines"]

_LAZY = frozenset({"ENGINES", "TorchSdpaBackend", "TorchSdpaEngine", "create_engines"})


def __getattr__(name: str) -> Any:
    """The engine names, imported from :mod:`._engines` on first access."""
    if name in _LAZY:
        value = getattr(importlib.import_module("._engines", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def create_backend() -> TorchSdpaBackend:
    """Entry-point factory of the ``torch`` backend (imports the engines on first call)."""
    from ._engines import TorchSdpaBackend

    return TorchSdpaBackend()
