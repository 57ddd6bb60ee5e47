"""The facts of hipDNN's wire about data types and constant values, shared by both codecs
(HIPDNN_WIRE.md A4, A5): hipDNN's DataType numbers (:data:`WIRE_DATA_TYPES`) and JSON spellings
(:data:`DATA_TYPE_NAMES`), and the TensorValue member a data type stores its constant in
(:func:`encode_value` / :func:`decode_value`).

Example:
    >>> from hipdnn_graph.types import DataType
    >>> WIRE_DATA_TYPES[DataType.INT4], WIRE_DATA_TYPES[DataType.BOOLEAN]
    (14, 16)
    >>> encode_value(0.1, DataType.HALF, "scale")
    (<ValueMember.Float16Value: 2>, 0.10000000149011612)
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any

import ml_dtypes
import numpy as np

from ..types import DataType
from .wire_rules import unsupported

__all__ = [
    "AFTER_INT64",
    "DATA_TYPE_NAMES",
    "VALUE_CODES",
    "WIRE_DATA_TYPES",
    "ValueMember",
    "data_type_from_wire",
    "decode_value",
    "encode_value",
    "float32",
    "wire_data_type",
]

# ----- data types (A5) ---------------------------------------------------------------------------

#: hipDNN's ``DataType`` numbers from 16 on, in order: the one place to change if hipDNN's
#: schema is read otherwise. Every hipDNN ``data_types.fbs`` that has BOOLEAN numbers it 16 and the
#: two FNUZ types 17 and 18 (the backend's ``hipdnnDataType_t`` inserts BOOLEAN after INT64 the
#: same way); the reference copy (ROCm/rocm-libraries 0f9f111) predates BOOLEAN and numbers the
#: FNUZ types 16 and 17. docs/serialization.md lists the sources.
AFTER_INT64: tuple[DataType, ...] = (
    DataType.BOOLEAN,
    DataType.FP8_E4M3_FNUZ,
    DataType.FP8_E5M2_FNUZ,
)
#: Frontend DataType → hipDNN's ``DataType`` number in ``data_types.fbs``. Types that are missing
#: have no number there and cannot be written.
WIRE_DATA_TYPES: dict[DataType, int] = {
    DataType.NOT_SET: 0,
    DataType.FLOAT: 1,
    DataType.HALF: 2,
    DataType.BFLOAT16: 3,
    DataType.DOUBLE: 4,
    DataType.UINT8: 5,
    DataType.INT32: 6,
    DataType.INT8: 7,
    DataType.FP8_E4M3: 8,
    DataType.FP8_E5M2: 9,
    DataType.FP8_E8M0: 10,
    DataType.FP4_E2M1: 11,
    DataType.FP6_E2M3: 12,
    DataType.FP6_E3M2: 13,
    DataType.INT4: 14,
    DataType.INT64: 15,
    **{dtype: 16 + i for i, dtype in enumerate(AFTER_INT64)},
}
_FROM_WIRE = {number: dtype for dtype, number in WIRE_DATA_TYPES.items()}
#: hipDNN's JSON spelling of each data type (lower case; NOT_SET is "unset").
DATA_TYPE_NAMES: dict[DataType, str] = {
    dtype: "unset" if dtype is DataType.NOT_SET else dtype.name.lower() for dtype in WIRE_DATA_TYPES
}


def wire_data_type(dtype: DataType, where: str) -> int:
    """hipDNN's number for ``dtype``.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for a type hipDNN's schema has no number for.
    """
    number = WIRE_DATA_TYPES.get(dtype)
    if number is None:
        raise unsupported(f"{where}: data type {dtype.name} has no number in hipDNN's schema")
    return number


def data_type_from_wire(number: int, where: str) -> DataType:
    """The frontend DataType of hipDNN's ``number``.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT for a number outside hipDNN's schema.
    """
    dtype = _FROM_WIRE.get(number)
    if dtype is None:
        raise unsupported(f"{where}: DataType {number} is not in hipDNN's schema")
    return dtype


# ----- tensor values (A4) ------------------------------------------------------------------------


class ValueMember(IntEnum):
    """The members of hipDNN's ``TensorValue`` union (each a struct)."""

    NONE = 0
    Float32Value = 1
    Float16Value = 2
    BFloat16Value = 3
    Float8Value = 4
    Int32Value = 5
    Float64Value = 6
    Int64Value = 7
    BoolValue = 8


#: struct code of each member's single field (its size is its alignment).
VALUE_CODES: dict[ValueMember, str] = {
    ValueMember.Float32Value: "f",
    ValueMember.Float16Value: "f",
    ValueMember.BFloat16Value: "f",
    ValueMember.Float8Value: "B",
    ValueMember.Int32Value: "i",
    ValueMember.Float64Value: "d",
    ValueMember.Int64Value: "q",
    ValueMember.BoolValue: "?",
}

_BYTE_TYPES: dict[DataType, Any] = {
    DataType.UINT8: np.uint8,
    DataType.INT8: np.int8,
    DataType.FP8_E4M3: ml_dtypes.float8_e4m3fn,
    DataType.FP8_E5M2: ml_dtypes.float8_e5m2,
    DataType.FP8_E4M3_FNUZ: ml_dtypes.float8_e4m3fnuz,
    DataType.FP8_E5M2_FNUZ: ml_dtypes.float8_e5m2fnuz,
}
_MEMBERS: dict[DataType, ValueMember] = {
    DataType.FLOAT: ValueMember.Float32Value,
    DataType.HALF: ValueMember.Float16Value,
    DataType.BFLOAT16: ValueMember.BFloat16Value,
    DataType.DOUBLE: ValueMember.Float64Value,
    DataType.INT32: ValueMember.Int32Value,
    DataType.INT64: ValueMember.Int64Value,
    DataType.BOOLEAN: ValueMember.BoolValue,
    **dict.fromkeys(_BYTE_TYPES, ValueMember.Float8Value),
}
_F32 = struct.Struct("<f")
_INT_RANGES = {
    ValueMember.Int32Value: (-(2**31), 2**31 - 1),
    ValueMember.Int64Value: (-(2**63), 2**63 - 1),
}


def float32(value: float, where: str) -> float:
    """``value`` rounded to the nearest binary32 (as a Python float, exactly).

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT when a finite value overflows binary32.
    """
    try:
        return float(_F32.unpack(_F32.pack(value))[0])
    except (OverflowError, struct.error):
        raise unsupported(f"{where}: {value!r} does not fit a 32-bit float") from None


def encode_value(value: Any, dtype: DataType, where: str) -> tuple[ValueMember, Any]:
    """The TensorValue member and raw content that store ``value`` in a ``dtype`` tensor.

    Float32/16, BFloat16Value hold the nearest binary32 (a Python float); Float8Value the 8-bit
    pattern (an int); BoolValue a bool; the others the value itself.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT when the type has no member or the value does not fit.
    """
    member = _MEMBERS.get(dtype)
    if member is None:
        raise unsupported(f"{where}: a {dtype.name} tensor cannot hold a value in hipDNN's schema")
    code = VALUE_CODES[member]
    if code == "f":
        return member, float32(float(value), where)
    if code == "d":
        return member, float(value)
    if code == "?":
        if not isinstance(value, (bool, np.bool_, int)) or value not in (0, 1):
            raise unsupported(f"{where}: {value!r} is not a {dtype.name} value")
        return member, bool(value)
    if code == "B":
        scalar_type = _BYTE_TYPES[dtype]
        if dtype in (DataType.UINT8, DataType.INT8):
            low, high = (0, 255) if dtype is DataType.UINT8 else (-128, 127)
            if (
                not (isinstance(value, int) or float(value).is_integer())
                or not low <= value <= high
            ):
                raise unsupported(f"{where}: {value!r} is not a {dtype.name} value")
            return member, int(value) & 0xFF
        pattern = int(np.array(value, dtype=scalar_type).view(np.uint8))
        return member, pattern
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise unsupported(f"{where}: {value!r} is not a {dtype.name} value")
    low, high = _INT_RANGES[member]
    if not low <= value <= high:
        raise unsupported(f"{where}: {value} does not fit {dtype.name}")
    return member, value


def decode_value(member: ValueMember, raw: Any, dtype: DataType, where: str) -> Any:
    """The frontend value of a TensorValue ``member`` holding ``raw`` in a ``dtype`` tensor.

    Raises:
        HipdnnError: UNSUPPORTED_GRAPH_FORMAT when the member is not the one ``dtype`` stores
            (hipDNN's "mismatched tensor value type"), or a byte pattern would not write back.
    """
    expected = _MEMBERS.get(dtype)
    if member is not expected:
        raise unsupported(
            f"{where}: a {dtype.name} tensor stores its value as "
            f"{expected.name if expected else 'nothing'}, not {member.name}"
        )
    if member is ValueMember.Float8Value:
        if dtype is DataType.UINT8:
            return raw
        if dtype is DataType.INT8:
            return raw - 256 if raw > 127 else raw
        value = float(np.array(raw, dtype=np.uint8).view(_BYTE_TYPES[dtype]))
        if encode_value(value, dtype, where)[1] != raw:
            raise unsupported(f"{where}: {dtype.name} pattern {raw:#04x} has no canonical value")
        return value
    return raw
