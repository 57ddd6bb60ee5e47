"""The checks attribute setters share: enum members, bounded integers, float32 scalars, and
SDPA's scale and dropout probability. Each rule is written once; its message names the value.

Example:
    >>> from hipdnn_graph.types import ReductionMode
    >>> mode_of(ReductionMode, 2, "reduction mode").name, bounded_int(7, "top_k", 32)
    ('MUL', 7)
    >>> mode_of(ReductionMode, True, "reduction mode")
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: Unknown reduction mode True
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from enum import IntEnum
from numbers import Real
from typing import Any, TypeVar

from pydantic import BeforeValidator

from ..errors import HipdnnError
from ..tensor_input import DataTypeLike, as_data_type, as_float32, as_index
from ..types import DataType, ErrorCode

__all__ = [
    "bounded_int",
    "checked_attn_scale",
    "checked_dropout_probability",
    "data_type_check",
    "enum_check",
    "enum_member",
    "mode_of",
    "optional",
    "real_float32",
]

E = TypeVar("E", bound=IntEnum)


def mode_of(enum: type[E], value: Any, what: str) -> E:
    """``value`` as a member of ``enum`` (a member or its number; not a bool).

    Raises:
        HipdnnError: ``INVALID_VALUE`` ``"Unknown <what> <value>"``.
    """
    if not isinstance(value, bool):
        try:
            return enum(operator.index(value))
        except (TypeError, ValueError):
            pass
    raise HipdnnError(ErrorCode.INVALID_VALUE, f"Unknown {what} {value!r}")


def enum_member(enum: type[E], value: Any, what: str) -> E:
    """``enum(value)``: a member, its number, or anything else the enum takes (a bool is its
    number here, as in hipDNN's bindings).

    Raises:
        HipdnnError: ``INVALID_VALUE`` ``"Unknown <what> <value>"`` for a value it does not take.

    Example:
        >>> from hipdnn_graph.types import DiagonalAlignment
        >>> enum_member(DiagonalAlignment, True, "diagonal alignment").name
        'BOTTOM_RIGHT'
    """
    try:
        return enum(value)
    except ValueError:
        raise HipdnnError(ErrorCode.INVALID_VALUE, f"Unknown {what} {value!r}") from None


def enum_check(enum: type[E]) -> Callable[[E | int, str], E]:
    """The check ``(value, what) -> member`` of ``enum`` (:func:`mode_of`), for a member's setter
    and its keyword.

    Example:
        >>> from hipdnn_graph.types import ReductionMode
        >>> enum_check(ReductionMode)(1, "reduction mode").name
        'ADD'
    """

    def check(value: E | int, what: str) -> E:
        return mode_of(enum, value, what)

    return check


def data_type_check(value: DataTypeLike, what: str) -> DataType:
    """``value`` as a :class:`DataType` (:func:`~hipdnn_graph.tensor_input.as_data_type`, whose
    message names the value), for a data-type member's setter."""
    return as_data_type(value)


def bounded_int(value: Any, what: str, bits: int, message: str = "") -> int:
    """``value`` as an integer that fits a signed ``bits``-bit integer (hipDNN's field type).

    ``message`` words the refusal (``{what}``, ``{number}`` and ``{bits}`` filled in); by
    default ``"<what> must fit a <bits>-bit integer, got <number>"``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a value that is not an integer or does not fit.
    """
    number = as_index(value, what)
    if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        text = message or "{what} must fit a {bits}-bit integer, got {number}"
        raise HipdnnError(ErrorCode.INVALID_VALUE, text.format(what=what, number=number, bits=bits))
    return number


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def real_float32(value: Any, what: str) -> float:
    """``value`` (a real number, not a bool) rounded to float32; ``inf`` when it overflows.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for anything else.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"{what} must be a float, got {type(value).__name__}"
        )
    try:
        return as_float32(float(value))
    except OverflowError:  # an int too large for a double
        return math.inf


def checked_attn_scale(value: Any) -> float:
    """A scale for ``attn_scale_value``: finite once rounded to float32, as hipDNN stores it.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for NaN, ±inf or a value that overflows float32.
    """
    rounded = real_float32(value, "attn_scale")
    if not math.isfinite(rounded):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"attn_scale must be a finite number that fits in float32, got {_short(value)}",
        )
    return rounded


def checked_dropout_probability(value: Any) -> float:
    """A dropout probability in ``[0, 1)`` once rounded to float32, as hipDNN stores it.

    Raises:
        HipdnnError: ``INVALID_VALUE`` outside ``[0, 1)`` (NaN included).
    """
    rounded = real_float32(value, "dropout probability")
    if not 0.0 <= rounded < 1.0:
        note = f" ({rounded!r} as float32)" if rounded != value else ""
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"dropout probability must be in [0, 1), got {_short(value)}{note}",
        )
    return rounded


def optional(check: Any) -> BeforeValidator:
    """The field validator running ``check`` on a value that is not ``None``."""
    return BeforeValidator(lambda value: None if value is None else check(value))
