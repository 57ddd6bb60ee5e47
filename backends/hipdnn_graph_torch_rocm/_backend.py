"""The ``torch`` backend: the cuDNN-frontend engine (:mod:`.cudnn_fe`), the SDPA engines
(:mod:`._engines`) and the family engines (:mod:`.family_engines`), in one list.

Example:
    >>> from hipdnn_graph_torch_rocm._backend import TorchBackend
    >>> [e.name for e in TorchBackend().engines()][-2:]
    ['TORCH_FUSION_ENGINE', 'TORCH_EAGER_ENGINE']
"""

from __future__ import annotations

from typing import Any

from ._engines import create_engines
from .cudnn_fe.engine import CudnnFrontendEngine
from .family_engines import create_family_engines

__all__ = ["TorchBackend"]


class TorchBackend:
    """The built-in ``torch`` backend plugin (torch is imported only when engines run)."""

    name = "torch"

    def __init__(self) -> None:
        self._engines: list[Any] = [
            CudnnFrontendEngine(),
            *create_engines(),
            *create_family_engines(),
        ]

    def engines(self) -> list[Any]:
        return self._engines
