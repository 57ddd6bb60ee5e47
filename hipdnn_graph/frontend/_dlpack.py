"""Reading DLPack producers as hipDNN's bindings do: data pointer, device, dims, strides, type.

The capsule is read by :mod:`hipdnn_graph.backend.dlpack` (not consumed: its producer keeps
ownership and frees it as usual). As in hipDNN's bindings:

* ``__dlpack__`` is called directly, with DLPack 1.x keywords first and the bare call for older
  producers, so **the producer's own exception reaches the caller unchanged**;
* the pointer path (``_get_data_ptr``, variant packs) asks for ``copy=False``: the address must
  belong to the producer, not to a temporary freed with the capsule (a producer that can only
  export a copy raises, typically ``BufferError``); ``tensor_like`` reads metadata only and
  accepts a copy.

Devices accepted: ``cpu`` (1), ``cuda`` (2), ``cuda_host`` (3), ``rocm`` (10), ``rocm_host`` (11).
hipDNN's own wheel accepts the ROCm ones; the CUDA ones are added here because hipdnn-graph also
runs on CUDA builds of torch.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.frontend._dlpack import read_dlpack
    >>> info = read_dlpack(np.zeros((2, 3), np.float32), "example")
    >>> info.dims, info.strides, info.data_type.name, info.is_host
    ([2, 3], [3, 1], 'FLOAT', True)
"""

from __future__ import annotations

from typing import Any

from ..backend.dlpack import DlpackLayout, export_capsule, read_capsule
from ._errors import FrontendTypeError, FrontendValueError

__all__ = ["SUPPORTED_DEVICES", "DlpackInfo", "read_dlpack"]

#: DLPack device types accepted: cpu, cuda, cuda_host, rocm, rocm_host
SUPPORTED_DEVICES = frozenset({1, 2, 3, 10, 11})

#: what a producer exports (see :class:`hipdnn_graph.backend.dlpack.DlpackLayout`)
DlpackInfo = DlpackLayout


def read_dlpack(producer: Any, what: str, *, copy: bool | None = None) -> DlpackInfo:
    """Read ``producer.__dlpack__(...)``; ``copy=False`` for an address that must stay valid.

    Raises:
        FrontendTypeError: ``producer`` has no ``__dlpack__``.
        FrontendValueError: not a valid capsule, or a device other than those listed above.
        Exception: whatever ``__dlpack__`` itself raises, unchanged (hipDNN's bindings let it
            through too).
    """
    if getattr(producer, "__dlpack__", None) is None:
        raise FrontendTypeError(f"{what}: expected an object implementing __dlpack__")
    capsule = export_capsule(producer, copy=copy)
    info = read_capsule(capsule)
    del capsule  # the producer's destructor frees its export
    if info is None:
        raise FrontendValueError(f"{what}: __dlpack__ did not return a valid DLPack capsule")
    if info.device_type not in SUPPORTED_DEVICES:
        raise FrontendValueError(
            f"{what}: unsupported DLPack device_type={info.device_type}; expected cpu (1), "
            "cuda (2), cuda_host (3), rocm (10), or rocm_host (11)"
        )
    return info
