"""Element types: hipDNN :class:`DataType` ↔ NumPy dtypes (ml_dtypes for bf16, fp8, fp6, fp4) ↔
torch names.

Example:
    >>> from hipdnn_graph import DataType
    >>> from hipdnn_graph.backend.dtypes import numpy_dtype
    >>> numpy_dtype(DataType.BFLOAT16).name, numpy_dtype(DataType.FLOAT).name
    ('bfloat16', 'float32')
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import ml_dtypes
import numpy as np

from ..dtype_names import DTYPE_NAMES
from ..errors import HipdnnError
from ..tensor import generate_strides
from ..types import DataType, ErrorCode

__all__ = ["TORCH_DTYPE_NAMES", "numpy_dtype", "numpy_empty_strided", "torch_dtype"]

_NUMPY: dict[DataType, Any] = {
    DataType.FLOAT: np.float32,
    DataType.HALF: np.float16,
    DataType.BFLOAT16: ml_dtypes.bfloat16,
    DataType.DOUBLE: np.float64,
    DataType.UINT8: np.uint8,
    DataType.INT32: np.int32,
    DataType.INT8: np.int8,
    DataType.INT64: np.int64,
    DataType.BOOLEAN: np.bool_,
    DataType.FP8_E4M3: ml_dtypes.float8_e4m3fn,
    DataType.FP8_E5M2: ml_dtypes.float8_e5m2,
    DataType.FP8_E4M3_FNUZ: ml_dtypes.float8_e4m3fnuz,
    DataType.FP8_E5M2_FNUZ: ml_dtypes.float8_e5m2fnuz,
    DataType.FP8_E8M0: ml_dtypes.float8_e8m0fnu,
    DataType.FP4_E2M1: ml_dtypes.float4_e2m1fn,
    DataType.FP6_E2M3: ml_dtypes.float6_e2m3fn,
    DataType.FP6_E3M2: ml_dtypes.float6_e3m2fn,
    DataType.COMPLEX_FP32: np.complex64,
    DataType.COMPLEX_FP64: np.complex128,
}

#: hipDNN data type → attribute name of the matching ``torch`` dtype (NumPy spells them alike)
TORCH_DTYPE_NAMES = DTYPE_NAMES


@cache
def numpy_dtype(data_type: DataType) -> np.dtype[Any]:
    """The NumPy dtype of ``data_type``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for types NumPy cannot hold (NOT_SET, INT4, INT8x4, …).
    """
    try:
        dtype: np.dtype[Any] = np.dtype(_NUMPY[DataType(data_type)])
        return dtype
    except KeyError:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"Data type {DataType(data_type).name} has no NumPy equivalent"
        ) from None


def numpy_empty_strided(
    shape: Sequence[int], strides: Sequence[int], data_type: DataType
) -> np.ndarray[Any, Any]:
    """An uninitialised, writeable NumPy array with these dims and element strides.

    Negative strides are honoured (the view starts inside its buffer, at the element that has
    the highest address reached by going backwards).

    Example:
        >>> from hipdnn_graph import DataType
        >>> a = numpy_empty_strided([2, 3], [1, 2], DataType.FLOAT)
        >>> a.shape, a.strides
        ((2, 3), (4, 8))
        >>> numpy_empty_strided([2, 3], [-3, 1], DataType.FLOAT).strides
        (-12, 4)

    Raises:
        HipdnnError: ``INVALID_VALUE`` when the memory cannot be had (the dims and strides
            span more than the machine can allocate).
    """
    dtype = numpy_dtype(data_type)
    shape, strides = tuple(int(d) for d in shape), tuple(int(s) for s in strides)
    try:
        if not shape or list(strides) == generate_strides(shape):
            return np.empty(shape, dtype=dtype)
        empty = any(d == 0 for d in shape)
        span = (
            0 if empty else 1 + sum((d - 1) * abs(s) for d, s in zip(shape, strides, strict=True))
        )
        # the element at index 0 sits after everything that negative strides reach backwards
        start = (
            0 if empty else sum((d - 1) * -s for d, s in zip(shape, strides, strict=True) if s < 0)
        )
        buffer = np.empty(span, dtype=dtype)
        # np.ndarray over the buffer keeps ml_dtypes' types (as_strided goes through the
        # array interface, whose type string loses them: '<f1' for FP8_E5M2)
        return np.ndarray(
            shape,
            dtype=dtype,
            buffer=buffer,
            offset=start * dtype.itemsize,
            strides=tuple(s * dtype.itemsize for s in strides),
        )
    except (MemoryError, ValueError, OverflowError) as exc:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Cannot allocate a {DataType(data_type).name} buffer of dims {list(shape)} and "
            f"strides {list(strides)}: {exc}",
        ) from None


def torch_dtype(data_type: DataType) -> Any:
    """The ``torch.dtype`` of ``data_type`` (imports torch).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for types torch cannot hold.
    """
    import torch

    name = TORCH_DTYPE_NAMES.get(DataType(data_type))
    if name is None or not hasattr(torch, name):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"Data type {DataType(data_type).name} has no torch equivalent"
        )
    return getattr(torch, name)
