"""Attributes of the reduction node (hipDNN's ``ReductionAttributes``).

Example:
    >>> from hipdnn_graph import ReductionAttributes, ReductionMode
    >>> a = ReductionAttributes().set_mode(ReductionMode.AMAX).set_is_deterministic(True)
    >>> a.get_mode().name, a.get_is_deterministic(), a.get_y()
    ('AMAX', True, None)
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any

from pydantic import BeforeValidator

from ..tensor_input import as_flag, keyword
from ..types import ReductionMode
from .checks import mode_of
from .node_attributes import NodeAttributes
from .slots import slot

__all__ = ["ReductionAttributes"]


def _mode(value: Any) -> ReductionMode:
    """``value`` as a :class:`ReductionMode` (a member or its number; not a bool)."""
    return mode_of(ReductionMode, value, "reduction mode")


class ReductionAttributes(NodeAttributes):
    """Configuration of a reduction node: ``Y = mode-reduce(X)`` over the dims where Y is 1.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | any | | Y | X's rank; each dim X's or 1, at least one smaller (set by the caller) |

    Members: ``mode`` (:class:`ReductionMode`, ``NOT_SET`` until set) and ``is_deterministic``
    (``False`` unless set: a request for deterministic kernels).
    """

    class InputNames(IntEnum):
        """Input slots in hipDNN's order."""

        X = 0

    class OutputNames(IntEnum):
        """Output slots in hipDNN's order."""

        Y = 0

    mode: Annotated[ReductionMode, BeforeValidator(_mode)] = ReductionMode.NOT_SET
    is_deterministic: Annotated[bool, keyword(as_flag, "is_deterministic")] = False

    set_x, get_x = slot("X")
    set_y, get_y = slot("Y")

    def set_mode(self, value: ReductionMode | int) -> ReductionAttributes:
        """The reduction (:class:`ReductionMode`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a mode.
        """
        self.mode = _mode(value)
        return self

    def get_mode(self) -> ReductionMode:
        return self.mode

    def set_is_deterministic(self, value: bool) -> ReductionAttributes:
        """Request deterministic kernels.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for a value that is not a bool.
        """
        self.is_deterministic = as_flag(value, "is_deterministic")
        return self

    def get_is_deterministic(self) -> bool:
        return self.is_deterministic
