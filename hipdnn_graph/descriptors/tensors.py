"""Tensor ↔ TENSOR descriptor, with pass-by-value scalars packed as little-endian bytes.

Example:
    >>> from hipdnn_graph import DataType, TensorAttributes
    >>> t = TensorAttributes(uid=3, name="scale").set_value(0.125)
    >>> back = tensor_from_descriptor(tensor_descriptor(t))
    >>> back.get_uid(), back.get_value(), back.get_data_type().name
    (3, 0.125, 'FLOAT')
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import ml_dtypes
import numpy as np

from ..errors import HipdnnError
from ..tensor import ScalarValue, TensorAttributes
from ..types import DataType, ErrorCode
from .backend_descriptor import BackendDescriptor
from .enums import AttributeName as A
from .enums import AttributeType as T
from .enums import DescriptorType

__all__ = ["pack_scalar", "tensor_descriptor", "tensor_from_descriptor", "unpack_scalar"]

_STRUCT: dict[DataType, str] = {
    DataType.FLOAT: "<f",
    DataType.DOUBLE: "<d",
    DataType.HALF: "<e",
    DataType.INT32: "<i",
    DataType.INT64: "<q",
    DataType.UINT8: "<B",
    DataType.INT8: "<b",
    DataType.BOOLEAN: "<?",
}
#: types without a struct code, packed through their ml_dtypes scalar type
_ML_DTYPES: dict[DataType, type] = {
    DataType.BFLOAT16: ml_dtypes.bfloat16,
    DataType.FP8_E4M3: ml_dtypes.float8_e4m3fn,
    DataType.FP8_E5M2: ml_dtypes.float8_e5m2,
    DataType.FP8_E4M3_FNUZ: ml_dtypes.float8_e4m3fnuz,
    DataType.FP8_E5M2_FNUZ: ml_dtypes.float8_e5m2fnuz,
}


def pack_scalar(value: ScalarValue, data_type: DataType) -> bytes:
    """The bytes hipDNN stores for a pass-by-value scalar of ``data_type``."""
    ml_type = _ML_DTYPES.get(data_type)
    if ml_type is not None:
        return np.array(value, dtype=ml_type).tobytes()
    fmt = _STRUCT.get(data_type)
    if fmt is None:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Pass-by-value scalars of type {data_type.name} are unsupported",
        )
    try:
        return struct.pack(fmt, value)
    except (struct.error, OverflowError) as exc:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"Value {value!r} does not fit {data_type.name}: {exc}"
        ) from None


def unpack_scalar(data: bytes, data_type: DataType) -> ScalarValue:
    """Inverse of :func:`pack_scalar`."""
    try:
        ml_type = _ML_DTYPES.get(data_type)
        if ml_type is not None:
            return float(np.frombuffer(data, dtype=ml_type, count=1)[0])
        fmt = _STRUCT[data_type]
        value: ScalarValue = struct.unpack(fmt, data)[0]
    except (KeyError, ValueError, struct.error):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"Cannot read a {data_type.name} pass-by-value scalar from {len(data)} bytes",
        ) from None
    return value


def tensor_descriptor(tensor: TensorAttributes) -> BackendDescriptor:
    """A finalized TENSOR descriptor for ``tensor`` (its uid must be set)."""
    desc = BackendDescriptor(DescriptorType.TENSOR)
    put: Callable[[A, T, list[object]], None] = desc.set_attribute
    put(A.TENSOR_UNIQUE_ID, T.INT64, [tensor.get_uid()])
    if tensor.name:
        put(A.TENSOR_NAME_EXT, T.CHAR, [tensor.name])
    put(A.TENSOR_DATA_TYPE, T.DATA_TYPE, [tensor.data_type])
    put(A.TENSOR_DIMENSIONS, T.INT64, list(tensor.dim))
    put(A.TENSOR_STRIDES, T.INT64, list(tensor.stride))
    put(A.TENSOR_IS_VIRTUAL, T.BOOLEAN, [tensor.is_virtual])
    if tensor.value is not None:
        put(A.TENSOR_VALUE_EXT, T.CHAR, [pack_scalar(tensor.value, tensor.data_type)])
    if tensor.is_pass_by_value:
        put(A.TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, T.BOOLEAN, [True])
    put(A.TENSOR_BYTE_ALIGNMENT, T.INT64, [tensor.alignment])
    desc.finalize()
    return desc


def tensor_from_descriptor(desc: BackendDescriptor) -> TensorAttributes:
    """Rebuild the :class:`TensorAttributes` a TENSOR descriptor describes."""
    get = desc.get_attribute
    tensor = TensorAttributes(
        uid=get(A.TENSOR_UNIQUE_ID, T.INT64)[0],
        data_type=get(A.TENSOR_DATA_TYPE, T.DATA_TYPE)[0],
        dim=get(A.TENSOR_DIMENSIONS, T.INT64),
        stride=get(A.TENSOR_STRIDES, T.INT64),
        is_virtual=get(A.TENSOR_IS_VIRTUAL, T.BOOLEAN)[0],
        is_pass_by_value=get(A.TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, T.BOOLEAN)[0],
        alignment=get(A.TENSOR_BYTE_ALIGNMENT, T.INT64)[0],
    )
    if desc.has_attribute(A.TENSOR_NAME_EXT):
        tensor.name = str(get(A.TENSOR_NAME_EXT, T.CHAR)[0])
    if desc.has_attribute(A.TENSOR_VALUE_EXT):
        raw = get(A.TENSOR_VALUE_EXT, T.CHAR)[0]
        tensor.value = unpack_scalar(bytes(raw), tensor.data_type)
    return tensor
