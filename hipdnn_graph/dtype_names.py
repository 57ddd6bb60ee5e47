"""The names NumPy (with ml_dtypes) and torch give hipDNN's data types, and the reverse lookup
that lets a ``torch.dtype`` or a NumPy dtype stand wherever a :class:`DataType` is expected.

Both libraries spell each type the same way (``float16``, ``bfloat16``, ``float8_e4m3fn``,
``float8_e8m0fnu``, …), so one table serves both; torch is never imported here (a ``torch.dtype``
is recognised by its type's module and name). The MX element types ``float4_e2m1fn``,
``float6_e2m3fn`` and ``float6_e3m2fn`` are ml_dtypes' (one element per byte); torch has no such
dtype (its ``float4_e2m1fn_x2`` packs two elements per byte), so torch lookups refuse them.

Example:
    >>> import numpy as np
    >>> from hipdnn_graph.dtype_names import data_type_of
    >>> data_type_of(np.float16).name, data_type_of(np.dtype("float32")).name
    ('HALF', 'FLOAT')
    >>> data_type_of("float16") is None  # strings are not dtypes
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .types import DataType

__all__ = ["DTYPE_NAMES", "data_type_of", "dtype_text"]

#: hipDNN data type → the name of the matching NumPy/ml_dtypes and ``torch`` dtype
DTYPE_NAMES: dict[DataType, str] = {
    DataType.FLOAT: "float32",
    DataType.HALF: "float16",
    DataType.BFLOAT16: "bfloat16",
    DataType.DOUBLE: "float64",
    DataType.UINT8: "uint8",
    DataType.INT32: "int32",
    DataType.INT8: "int8",
    DataType.INT64: "int64",
    DataType.BOOLEAN: "bool",
    DataType.FP8_E4M3: "float8_e4m3fn",
    DataType.FP8_E5M2: "float8_e5m2",
    DataType.FP8_E4M3_FNUZ: "float8_e4m3fnuz",
    DataType.FP8_E5M2_FNUZ: "float8_e5m2fnuz",
    DataType.FP8_E8M0: "float8_e8m0fnu",
    DataType.FP4_E2M1: "float4_e2m1fn",
    DataType.FP6_E2M3: "float6_e2m3fn",
    DataType.FP6_E3M2: "float6_e3m2fn",
    DataType.COMPLEX_FP32: "complex64",
    DataType.COMPLEX_FP64: "complex128",
}
_BY_NAME = {name: data_type for data_type, name in DTYPE_NAMES.items()}


def _is_torch_dtype(value: Any) -> bool:
    kind = type(value)
    return kind.__name__ == "dtype" and kind.__module__ == "torch"


def dtype_text(value: Any) -> str | None:
    """The dtype name of a ``torch.dtype`` (``"float16"``), a NumPy dtype or scalar type, or
    ``None`` when ``value`` is neither."""
    if _is_torch_dtype(value):
        return str(value).removeprefix("torch.")
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return str(np.dtype(value).name)
    return None


def data_type_of(value: Any) -> DataType | None:
    """The :class:`DataType` of a ``torch.dtype`` or NumPy dtype (``None`` for anything else).

    Raises:
        KeyError: a dtype hipDNN has no data type for (``torch.uint16``, ``np.float128``, …);
            the key is the dtype's name.
    """
    name = dtype_text(value)
    if name is None:
        return None
    return _BY_NAME[name]
