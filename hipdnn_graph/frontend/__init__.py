"""hipDNN's own Python API (the ``hipdnn_frontend`` wheel), running on hipdnn-graph.

Code written as ``import hipdnn_frontend as hipdnn`` runs unchanged on hipdnn-graph's engines
(NumPy on any machine, torch on CUDA/ROCm) after :func:`install`, for SDPA graphs
(pointwise, matmul, reduction, RMSNorm and layer-norm (forward and backward), convolution,
batch-norm, MoE grouped matmul, custom op and block-scale graphs are built, validated, serialized
and run on the engines that run their families): the names, signatures, return values (``Error``
values, tuples) and raised exception types are those of hipDNN's bindings. See
``docs/hipdnn-python.md``.

Example:
    >>> import hipdnn_graph.frontend as hipdnn
    >>> t = hipdnn.Tensor.create([1, 2, 8, 16], hipdnn.DataType.FLOAT)
    >>> hipdnn.Graph().validate().is_good(), t.get_volume()
    (True, 256)
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from . import hipdnn_frontend_python
from ._unsupported import MODULE_NAMES, unsupported_name
from .hipdnn_frontend_python import *  # noqa: F403
from .hipdnn_frontend_python import __all__ as _binding_names

__all__ = [*_binding_names, "hipdnn_frontend_python", "install"]

MODULE_NAME = "hipdnn_frontend"


def _is_real_module(module: Any) -> bool:
    """Whether an imported ``hipdnn_frontend`` is a real module or package (it has a file: an
    ``__init__.py``, a source file or an extension), not a namespace package that a bare
    folder of that name on ``sys.path`` (the working directory, say) makes."""
    return getattr(module, "__file__", None) is not None


def _real_module_is_importable() -> bool:
    """Whether ``import hipdnn_frontend`` would load a real module or package, checked without
    importing it; a folder without ``__init__.py`` (a namespace package) does not count."""
    spec = importlib.util.find_spec(MODULE_NAME)
    return spec is not None and spec.has_location and spec.origin is not None


def install() -> str:
    """Make ``import hipdnn_frontend`` resolve to this module, unless hipDNN's own wheel is
    importable (a real installation is never shadowed). A bare folder named
    ``hipdnn_frontend`` (no ``__init__.py``, so only a namespace package) is no installation:
    it neither counts as hipDNN's wheel nor keeps this module from being installed.

    Returns:
        Which module ``hipdnn_frontend`` is: ``"hipdnn_graph.frontend"`` or ``"hipdnn_frontend"``
        (hipDNN's wheel).

    Example:
        >>> import hipdnn_graph.frontend as hipdnn
        >>> hipdnn.install() in ("hipdnn_graph.frontend", "hipdnn_frontend")
        True
    """
    this = sys.modules[__name__]
    current = sys.modules.get(MODULE_NAME)
    if current is this:
        return __name__
    if current is not None:
        if _is_real_module(current):
            return MODULE_NAME
    elif _real_module_is_importable():
        return MODULE_NAME
    sys.modules[MODULE_NAME] = this
    sys.modules[f"{MODULE_NAME}.hipdnn_frontend_python"] = hipdnn_frontend_python
    return __name__


def __getattr__(name: str) -> Any:
    if name in MODULE_NAMES:
        raise unsupported_name(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
