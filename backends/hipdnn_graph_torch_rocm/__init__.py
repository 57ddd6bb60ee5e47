"""The torch backend (entry point ``torch``): SDPA engines on torch's fused kernels (ROCm and
CUDA builds) plus a chunked math engine that runs everywhere, and for the other node families
(:mod:`.families`) a whole-graph fusion engine (``TORCH_FUSION_ENGINE``, ``torch.compile``)
and a node-by-node eager engine (``TORCH_EAGER_ENGINE``), see :mod:`.family_engines`.

Nothing heavy is imported with the package: the engines (and with them ``hipdnn_graph``, so
pydantic) load on first use, through :func:`create_backend` or the names below, and torch only
when an engine checks or runs a graph. So ``import hipdnn_graph`` stays light, and the torch
kernels under :mod:`hipdnn_graph_torch_rocm.kernels` import with torch alone (no pydantic, no
``hipdnn_graph``).

Example:
    >>> import hipdnn_graph_torch_rocm as tr
    >>> backend = tr.create_backend()
    >>> [e.name for e in backend.engines()][-3:]
    ['TORCH_SDPA_MATH_ENGINE', 'TORCH_FUSION_ENGINE', 'TORCH_EAGER_ENGINE']
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backend import TorchBackend
    from ._engines import ENGINES, TorchSdpaBackend, TorchSdpaEngine, create_engines
    from .family_engines import TorchEagerEngine, TorchFusionEngine, create_family_engines

__all__ = [
    "ENGINES",
    "TorchBackend",
    "TorchEagerEngine",
    "TorchFusionEngine",
    "TorchSdpaBackend",
    "TorchSdpaEngine",
    "create_backend",
    "create_engines",
    "create_family_engines",
]

#: lazily imported name -> the module holding it
_LAZY = {
    "ENGINES": "._engines",
    "TorchSdpaBackend": "._engines",
    "TorchSdpaEngine": "._engines",
    "create_engines": "._engines",
    "TorchBackend": "._backend",
    "TorchEagerEngine": ".family_engines",
    "TorchFusionEngine": ".family_engines",
    "create_family_engines": ".family_engines",
}


def __getattr__(name: str) -> Any:
    """The engine names, imported from their modules on first access."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def create_backend() -> TorchBackend:
    """Entry-point factory of the ``torch`` backend: the SDPA engines, then the family engines
    (imports the engines on first call)."""
    from ._backend import TorchBackend

    return TorchBackend()
