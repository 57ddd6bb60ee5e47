"""How the tensor model reads what users pass: integer lists, indices, flags, names, scalars
and data types, each checked and refused with a ``HipdnnError`` (``INVALID_VALUE``) that names
the field, for the setters and the keywords of :class:`~hipdnn_graph.tensor.TensorAttributes`
alike (and for the frontend's attribute setters).

Example:
    >>> as_int_list((2, 8), "dims"), as_data_type(2).name
    ([2, 8], 'HALF')
    >>> as_flag("false", "is_virtual")
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: is_virtual must be a bool (True or False), got str 'false'
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from pydantic import BeforeValidator

from .dtype_names import data_type_of
from .errors import HipdnnError
from .types import DataType, ErrorCode

__all__ = [
    "DataTypeLike",
    "ScalarValue",
    "as_data_type",
    "as_flag",
    "as_float32",
    "as_index",
    "as_int_list",
    "as_optional_flag",
    "as_optional_index",
    "as_scalar_value",
    "as_text",
    "keyword",
    "scalar_type_of",
]

#: Python types a pass-by-value scalar may hold.
ScalarValue = bool | int | float
#: what stands for a :class:`DataType`: a member, its integer value, or a ``torch.dtype`` or
#: NumPy dtype (``torch.float16``, ``np.float32``) of a type hipDNN has
DataTypeLike = DataType | int | Any

_INT32_RANGE = range(-(2**31), 2**31)
_INT64_RANGE = range(-(2**63), 2**63)

# numpy scalar type -> hipDNN data type, for set_value(); Python scalars follow C++ literals.
_NUMPY_SCALAR_TYPES: dict[str, DataType] = {
    "float64": DataType.DOUBLE,
    "float32": DataType.FLOAT,
    "float16": DataType.HALF,
    "bfloat16": DataType.BFLOAT16,
    "uint8": DataType.UINT8,
    "int32": DataType.INT32,
    "int64": DataType.INT64,
    "bool": DataType.BOOLEAN,
}


def as_int_list(values: Iterable[Any], what: str) -> list[int]:
    """Convert ``values`` to a list of Python ints, or raise a clear INVALID_VALUE error.

    Integers and NumPy integers are accepted; floats (even ``16.0``), bools and strings are not.
    """
    if isinstance(values, str | bytes):
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"{what} must be a sequence of integers")
    try:
        items = list(values)
        ints = list(map(operator.index, items))  # NumPy bools have no __index__: TypeError
        if bool not in map(type, items):
            return ints
    except TypeError:
        pass
    raise HipdnnError(
        ErrorCode.INVALID_VALUE, f"{what} must be a sequence of integers, got {values!r}"
    )


def as_index(value: Any, what: str) -> int:
    """``value`` as a Python int, or a clear INVALID_VALUE error (a bool is not an integer here)."""
    if not isinstance(value, bool | np.bool_):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise HipdnnError(ErrorCode.INVALID_VALUE, f"{what} must be an integer, got {value!r}")


def as_flag(value: Any, what: str) -> bool:
    """``value`` as a bool: only ``bool`` and NumPy bools are accepted (``"false"`` is refused,
    not read as a truthy string)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise HipdnnError(
        ErrorCode.INVALID_VALUE,
        f"{what} must be a bool (True or False), got {type(value).__name__} {value!r}",
    )


def as_float32(value: float) -> float:
    """``value`` rounded to float32 (``inf`` when it overflows, without a warning): the type
    hipDNN stores scalar values and attributes in, so that descriptors and serialized graphs
    round-trip exactly."""
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def scalar_type_of(value: Any) -> tuple[ScalarValue, DataType]:
    """Python value and hipDNN data type of a scalar given to ``set_value``."""
    if isinstance(value, bool | np.bool_):
        return bool(value), DataType.BOOLEAN
    if isinstance(value, np.generic):
        dtype = _NUMPY_SCALAR_TYPES.get(value.dtype.name)
        if dtype is None:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"Unsupported scalar type {value.dtype.name} for set_value"
            )
        py = value.item()
        return (float(py) if isinstance(py, float) else int(py)), dtype
    if isinstance(value, int):
        if value not in _INT64_RANGE:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"set_value({value}): the value does not fit in INT64"
            )
        return value, DataType.INT32 if value in _INT32_RANGE else DataType.INT64
    if isinstance(value, float):
        rounded = as_float32(value)
        if math.isinf(rounded) and not math.isinf(value):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"set_value({value!r}): the value overflows FLOAT (float32); "
                "pass np.float64(...) for a DOUBLE constant",
            )
        return rounded, DataType.FLOAT
    raise HipdnnError(
        ErrorCode.INVALID_VALUE,
        f"Unsupported scalar type {type(value).__name__} for set_value "
        "(use bool, int, float or a NumPy scalar)",
    )


def as_data_type(value: DataTypeLike) -> DataType:
    """``value`` as a :class:`DataType`: a member, its integer value (not a bool or a float), or
    a ``torch.dtype`` / NumPy dtype of a type hipDNN has (``torch.float16`` is HALF)."""
    if isinstance(value, DataType):
        return value
    try:
        if not isinstance(value, bool | np.bool_):
            return DataType(operator.index(value))
    except (TypeError, ValueError):
        pass
    try:
        data_type = data_type_of(value)
    except KeyError as missing:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"Data type {value} ({missing}) has no hipDNN DataType"
        ) from None
    if data_type is not None:
        return data_type
    raise HipdnnError(ErrorCode.INVALID_VALUE, f"Unknown data type {value!r}")


def as_scalar_value(value: Any) -> ScalarValue | None:
    """A pass-by-value scalar given as a keyword: bool, int, float or a NumPy scalar."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, np.generic) and isinstance(value.item(), bool | int | float):
        item: ScalarValue = value.item()
        return item
    raise HipdnnError(
        ErrorCode.INVALID_VALUE,
        f"TensorAttributes value must be a bool, int or float, got {type(value).__name__}",
    )


def keyword(convert: Callable[[Any, str], Any], what: str) -> BeforeValidator:
    """Run a keyword given to ``TensorAttributes(...)`` through the same check as its setter."""
    return BeforeValidator(lambda value: convert(value, what))


def as_text(value: Any, what: str) -> str:
    """``value`` as a name: a ``str`` that UTF-8 can encode (hipDNN's wire and JSON hold UTF-8,
    which has no code for a lone surrogate such as ``"\\ud800"``)."""
    if not isinstance(value, str):
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"{what} must be a string")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"{what} {value!r} is not valid Unicode text: it holds a lone surrogate "
                f"at position {exc.start}",
            ) from None
    return value


def as_optional_index(value: Any, what: str) -> int | None:
    return None if value is None else as_index(value, what)


def as_optional_flag(value: Any, what: str) -> bool | None:
    return None if value is None else as_flag(value, what)
