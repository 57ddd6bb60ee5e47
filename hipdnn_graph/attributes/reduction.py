"""Attributes of the reduction node (hipDNN's ``ReductionAttributes``).

Example:
    >>> from hipdnn_graph import ReductionAttributes, ReductionMode
    >>> a = ReductionAttributes().set_mode(ReductionMode.AMAX).set_is_deterministic(True)
    >>> a.get_mode().name, a.get_is_deterministic(), a.get_y()
    ('AMAX', True, None)
"""

from __future__ import annotations

from typing import Annotated

from ..tensor_input import as_flag, keyword
from ..types import ReductionMode
from .accessors import member, slot
from .checks import enum_check
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

__all__ = ["ReductionAttributes"]


#: ``(value, what) -> ReductionMode`` (a member or its number; not a bool)
_mode = enum_check(ReductionMode)


class ReductionAttributes(NodeAttributes):
    """Configuration of a reduction node: ``Y = mode-reduce(X)`` over the dims where Y is 1.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | any | | Y | X's rank; each dim X's or 1, at least one smaller (set by the caller) |

    Members: ``mode`` (:class:`ReductionMode`, ``NOT_SET`` until set) and ``is_deterministic``
    (``False`` unless set: a request for deterministic kernels).
    """

    class InputNames(InputSlots):
        X = 0

    class OutputNames(OutputSlots):
        Y = 0

    mode: Annotated[ReductionMode, keyword(_mode, "reduction mode")] = ReductionMode.NOT_SET
    is_deterministic: Annotated[bool, keyword(as_flag, "is_deterministic")] = False

    set_x, get_x = slot("X")
    set_y, get_y = slot("Y")

    set_mode, get_mode = member("mode", _mode, "reduction mode", doc="The reduction.")
    set_is_deterministic, get_is_deterministic = member(
        "is_deterministic", as_flag, doc="Request deterministic kernels."
    )
