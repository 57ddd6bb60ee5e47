"""``Tensor``: hipDNN's bound ``TensorAttributes``, over the core's :class:`TensorAttributes`.

It differs from the core class in what hipDNN's bindings changed: a static :meth:`Tensor.create`,
``set_value(value, data_type=None)`` (a Python ``int`` is INT64), and ``validate()`` returning an
:class:`~hipdnn_graph.frontend.Error` instead of raising. It has no fields of its own, so tensors
the core creates (node outputs, loaded graphs) are re-typed to it by :func:`adopt`.

Example:
    >>> from hipdnn_graph.frontend import DataType, Tensor
    >>> t = Tensor.create([2, 8, 16, 64], DataType.HALF)
    >>> t.get_stride(), t.validate().is_good()
    ([8192, 1024, 64, 1], True)
    >>> Tensor().set_value(3).get_data_type().name
    'INT64'
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from ..backend.dtypes import numpy_dtype
from ..errors import HipdnnError
from ..tensor import DataTypeLike, TensorAttributes, generate_strides
from ..types import DataType
from ._errors import Error, FrontendTypeError, FrontendValueError

__all__ = ["Tensor", "adopt", "adopt_all"]

#: data types ``set_value`` accepts, as hipDNN's binding does
VALUE_TYPES = (
    DataType.FLOAT,
    DataType.DOUBLE,
    DataType.HALF,
    DataType.BFLOAT16,
    DataType.UINT8,
    DataType.INT32,
    DataType.INT64,
    DataType.BOOLEAN,
)
_FLOATING = (DataType.FLOAT, DataType.DOUBLE, DataType.HALF, DataType.BFLOAT16)


class Tensor(TensorAttributes):
    """A tensor handle with hipDNN's Python-binding API (see the module docstring)."""

    # no state of its own: the same memory layout as TensorAttributes, so that adopt() can
    # re-type a core tensor in place
    __slots__ = ()

    @staticmethod
    def create(dims: Sequence[int], data_type: DataTypeLike) -> Tensor:
        """A tensor with ``dims``, packed row-major strides and ``data_type``."""
        tensor = Tensor().set_dim(dims).set_data_type(data_type)
        return tensor.set_stride(generate_strides(tensor.dim))  # type: ignore[return-value]

    def set_value(  # type: ignore[override]
        self, value: bool | int | float, data_type: DataType | int | None = None
    ) -> Tensor:
        """Store a compile-time constant scalar; dims and strides become ``[1]``.

        Without ``data_type`` a ``bool`` is BOOLEAN, an ``int`` INT64 and a ``float`` FLOAT.
        ``data_type`` may be FLOAT, DOUBLE, HALF, BFLOAT16, UINT8, INT32, INT64 or BOOLEAN; the
        value is rounded to (floats) or range-checked in (integers) that type.

        Raises:
            FrontendTypeError: the value is not a bool, int or float.
            FrontendValueError: another ``data_type``, a value that does not fit it, or a tensor
                whose dims hold more than one element.
        """
        if isinstance(value, bool | np.bool_):
            inferred = DataType.BOOLEAN
        elif isinstance(value, numbers.Integral):
            inferred = DataType.INT64
        elif isinstance(value, numbers.Real):
            inferred = DataType.FLOAT
        else:
            raise FrontendTypeError(
                f"set_value() expects a bool, int or float, got {type(value).__name__}"
            )
        target = inferred if data_type is None else _value_type(data_type)
        if self.get_volume() != 1:
            raise FrontendValueError(
                f"set_value() needs a single-element tensor, but tensor '{self.name}' has "
                f"dims {self.dim}"
            )
        if target not in _FLOATING and target != DataType.BOOLEAN:
            if isinstance(value, float) and not float(value).is_integer():
                raise FrontendValueError(f"set_value(): {value!r} is not an integer {target.name}")
            info = np.iinfo(numpy_dtype(target))
            if not info.min <= int(value) <= info.max:
                raise FrontendValueError(f"set_value(): {value!r} does not fit in {target.name}")
            value = int(value)
        scalar = numpy_dtype(target).type(value)
        try:
            super().set_value(scalar)
        except HipdnnError as err:  # pragma: no cover - every VALUE_TYPES scalar is accepted
            raise FrontendValueError(err.message) from None
        return self

    def validate(self) -> Error:  # type: ignore[override]
        """Check the tensor; returns hipDNN's ``Error`` (``is_good()`` when every rule holds)."""
        try:
            self.check()
        except HipdnnError as err:
            return Error.of(err)
        return Error()


def _value_type(data_type: Any) -> DataType:
    try:
        target = DataType(data_type)
    except (ValueError, TypeError):
        raise FrontendValueError(f"set_value(): unknown data type {data_type!r}") from None
    if target not in VALUE_TYPES:
        raise FrontendValueError(
            f"set_value(): data type {target.name} is not supported for scalar values "
            f"(use one of {', '.join(t.name for t in VALUE_TYPES)})"
        )
    return target


T = TypeVar("T", bound=TensorAttributes)


def adopt(tensor: T | None) -> T | None:
    """Re-type a core :class:`TensorAttributes` to :class:`Tensor` in place (same object, same
    fields; only the methods above change), so that node outputs behave like user tensors."""
    if tensor is not None and type(tensor) is TensorAttributes:
        object.__setattr__(tensor, "__class__", Tensor)
    return tensor


def adopt_all(tensors: Iterable[TensorAttributes]) -> None:
    """:func:`adopt` every tensor of an iterable."""
    for tensor in tensors:
        adopt(tensor)
