"""Attributes of the block-scale quantize node (hipDNN's ``BlockScaleQuantizeAttributes``).

Example:
    >>> from hipdnn_graph import BlockScaleQuantizeAttributes
    >>> a = BlockScaleQuantizeAttributes().set_block_size(32).set_axis(1)
    >>> a.get_block_size(), a.get_axis(), a.get_transpose(), a.get_scale()
    (32, 1, False, None)
"""

from __future__ import annotations

from typing import Annotated, Any

from ..tensor_input import as_flag, keyword
from .accessors import member, optional_member, slot
from .checks import bounded_int
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

__all__ = ["BlockScaleQuantizeAttributes", "int32_value", "optional_int32", "optional_int64"]


def int32_value(value: Any, what: str) -> int:
    """``value`` as an int that fits hipDNN's ``int32_t``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a value that is not an integer or does not fit.
    """
    return bounded_int(value, what, 32)


def optional_int32(value: Any, what: str) -> int | None:
    """``None``, or ``value`` as an ``int32_t`` (see :func:`int32_value`)."""
    return None if value is None else int32_value(value, what)


def optional_int64(value: Any, what: str) -> int | None:
    """``None``, or ``value`` as an int that fits hipDNN's ``int64_t``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a value that is not an integer or does not fit.
    """
    return None if value is None else bounded_int(value, what, 64)


class BlockScaleQuantizeAttributes(NodeAttributes):
    """Configuration of a block-scale quantize node (MX block scaling: every ``block_size``
    consecutive elements of X along ``axis`` share one scale).

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | rank ≥ 1 | | Y | X's (inferred) |
    | | | | SCALE | X's with ``dim[axis] / block_size`` (inferred) |

    Members: ``block_size`` (``None`` until set; the node requires it), ``axis`` (``None``:
    the last dim) and ``transpose`` (``False``: Y and SCALE take X's layout; ``True``: the
    block axis becomes their innermost dim).
    """

    class InputNames(InputSlots):
        X = 0

    class OutputNames(OutputSlots):
        Y = 0
        SCALE = 1

    block_size: Annotated[int | None, keyword(optional_int32, "block_size")] = None
    axis: Annotated[int | None, keyword(optional_int64, "axis")] = None
    transpose: Annotated[bool, keyword(as_flag, "transpose")] = False

    set_x, get_x = slot("X")
    set_y, get_y = slot("Y")
    set_scale, get_scale = slot("SCALE")

    set_block_size, get_block_size = optional_member(
        "block_size", int32_value, doc="How many consecutive elements along the axis share a scale."
    )
    set_axis, get_axis = member(
        "axis", optional_int64, doc="The dim the blocks run along (the last dim when unset)."
    )
    set_transpose, get_transpose = member(
        "transpose", as_flag, doc="Lay Y and SCALE out with the block axis innermost."
    )
