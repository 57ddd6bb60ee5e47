"""Attributes of the example family ``clamp``: ``Y = min(max(X, lower), upper)``.

The first of the family's files (docs/adding-a-family.md): one pydantic class with the slot
enums, the members, and a setter and getter for each, as hipDNN's attribute classes have.

Example:
    >>> from clamp_family.attributes import ClampAttributes
    >>> a = ClampAttributes().set_lower(-1).set_upper(2.5)
    >>> a.get_lower(), a.get_upper(), a.get_x()
    (-1.0, 2.5, None)
    >>> ClampAttributes().set_lower(float("nan"))
    Traceback (most recent call last):
    ...
    hipdnn_graph.errors.HipdnnError: ClampAttributes: lower must be a finite number, got nan
"""

from __future__ import annotations

import math
from enum import IntEnum
from numbers import Real
from typing import Annotated, Any

from pydantic import BeforeValidator

import hipdnn_graph as hg
from hipdnn_graph.attributes import NodeAttributes

__all__ = ["ClampAttributes"]


def _bound(value: Any, what: str) -> float | None:
    """``value`` as a bound: ``None`` (no bound) or a finite real number (not a bool).

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the member.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise hg.HipdnnError(
            hg.ErrorCode.INVALID_VALUE,
            f"ClampAttributes: {what} must be a finite number, got {value!r}",
        )
    return float(value)


class ClampAttributes(NodeAttributes):
    """Configuration of a clamp node: every element of ``X`` limited to ``[lower, upper]``.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | any | | Y | X's (inferred) |

    Members: ``lower`` and ``upper`` (``None`` until set: no bound on that side; at least one
    is needed, and ``lower <= upper``: the node's rules say so).
    """

    class InputNames(IntEnum):
        """Input slots."""

        X = 0

    class OutputNames(IntEnum):
        """Output slots."""

        Y = 0

    lower: Annotated[float | None, BeforeValidator(lambda v: _bound(v, "lower"))] = None
    upper: Annotated[float | None, BeforeValidator(lambda v: _bound(v, "upper"))] = None

    def set_x(self, tensor: hg.TensorAttributes | None) -> ClampAttributes:
        return self._set_input(self.InputNames.X, tensor)

    def set_y(self, tensor: hg.TensorAttributes | None) -> ClampAttributes:
        return self._set_output(self.OutputNames.Y, tensor)

    def get_x(self) -> hg.TensorAttributes | None:
        return self.inputs.get(self.InputNames.X)

    def get_y(self) -> hg.TensorAttributes | None:
        return self.outputs.get(self.OutputNames.Y)

    def set_lower(self, value: float | None) -> ClampAttributes:
        """The lower bound (``None``: none).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a finite number.
        """
        self.lower = _bound(value, "lower")
        return self

    def get_lower(self) -> float | None:
        return self.lower

    def set_upper(self, value: float | None) -> ClampAttributes:
        """The upper bound (``None``: none).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a finite number.
        """
        self.upper = _bound(value, "upper")
        return self

    def get_upper(self) -> float | None:
        return self.upper
