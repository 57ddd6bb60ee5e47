"""What an array declares: dims, element strides, data type and whether it lives in ``cpu``
memory, read from a NumPy array, a torch tensor (any device, ``meta`` included) or any other
DLPack producer without importing torch. ``Graph.tensor_like`` declares tensors from it.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.backend.array_info import describe_array
    >>> info = describe_array(np.zeros((2, 4), np.float16).T, "x")
    >>> info.dims, info.strides, info.data_type.name, info.on_cpu, info.is_runtime_scalar
    ([4, 2], [1, 4], 'HALF', True, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtype_names import data_type_of, dtype_text
from ..errors import HipdnnError
from ..types import DataType, ErrorCode
from .dlpack import CPU, export_capsule, read_capsule, runtime_scalar
from .variant_pack import is_torch_tensor

__all__ = ["ArrayInfo", "describe_array"]


@dataclass(frozen=True)
class ArrayInfo:
    """An array's declaration: dims, element strides, data type, and ``cpu`` residence."""

    dims: list[int]
    strides: list[int]
    data_type: DataType
    on_cpu: bool

    @property
    def is_runtime_scalar(self) -> bool:
        """See :func:`hipdnn_graph.backend.dlpack.runtime_scalar`."""
        return runtime_scalar(self.on_cpu, self.dims)


def _fail(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


def _data_type(dtype: Any, what: str) -> DataType:
    try:
        data_type = data_type_of(dtype)
    except KeyError:
        data_type = None
    if data_type is None:
        raise _fail(f"{what}: dtype {dtype_text(dtype) or dtype} has no hipDNN DataType")
    return data_type


def describe_array(value: Any, what: str) -> ArrayInfo:
    """Read ``value``'s declaration (no data is read, nothing is copied).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a value that is no array, a dtype hipDNN lacks, byte
            strides that are not whole elements, a torch layout without strides, or a DLPack
            producer that fails (its exception is the cause) or returns no valid capsule.
    """
    if isinstance(value, np.ndarray):
        itemsize = value.itemsize
        if any(s % itemsize for s in value.strides):
            raise _fail(f"{what}: byte strides {value.strides} are not whole elements")
        return ArrayInfo(
            dims=list(value.shape),
            strides=[s // itemsize for s in value.strides],
            data_type=_data_type(value.dtype, what),
            on_cpu=True,
        )
    if is_torch_tensor(value):
        if str(value.layout) != "torch.strided" or value.is_nested:
            raise _fail(f"{what}: a {value.layout} tensor has no strides; pass a dense tensor")
        return ArrayInfo(
            dims=list(value.shape),
            strides=list(value.stride()),
            data_type=_data_type(value.dtype, what),
            on_cpu=value.device.type == "cpu",
        )
    if hasattr(value, "__dlpack__"):
        try:
            layout = read_capsule(export_capsule(value, copy=None))
        except Exception as exc:
            raise _fail(f"{what}: __dlpack__ failed: {type(exc).__name__}: {exc}") from exc
        if layout is None:
            raise _fail(f"{what}: __dlpack__ did not return a valid DLPack capsule")
        if layout.data_type is None:
            raise _fail(f"{what}: DLPack dtype {layout.dtype_text()} has no hipDNN DataType")
        return ArrayInfo(
            dims=layout.dims,
            strides=layout.strides,
            data_type=layout.data_type,
            on_cpu=layout.device_type == CPU,
        )
    raise _fail(
        f"{what} expects a TensorAttributes, an array (NumPy, torch) or a DLPack producer, "
        f"got {type(value).__name__}"
    )
