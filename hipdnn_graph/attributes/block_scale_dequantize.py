"""Attributes of the block-scale dequantize node (hipDNN's ``BlockScaleDequantizeAttributes``).

Example:
    >>> from hipdnn_graph import BlockScaleDequantizeAttributes
    >>> a = BlockScaleDequantizeAttributes().set_block_size(32, 1)
    >>> a.get_block_size(), a.get_is_negative_scale()
    ([1, 32], False)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from ..tensor_input import as_flag, as_index, as_int_list, keyword
from .accessors import member, slot
from .block_scale_quantize import int32_value
from .node_attributes import InputSlots, NodeAttributes, OutputSlots

__all__ = ["BlockScaleDequantizeAttributes"]


def _int32_list(values: Any, what: str) -> list[int]:
    return [int32_value(v, what) for v in as_int_list(values, what)]


class BlockScaleDequantizeAttributes(NodeAttributes):
    """Configuration of a block-scale dequantize node: ``Y = X · SCALE`` broadcast over blocks,
    ``block_size[i]`` elements of X per SCALE element along dim ``i`` (1 past the list's end).

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | rank ≥ 1 | | Y | X's (inferred) |
    | SCALE | X's dims divided by the block sizes | | | |

    Members: ``block_size`` (one entry per leading dim, empty until set; the node requires it)
    and ``is_negative_scale`` (``False`` unless set; carried, not used by the shape rules).
    """

    class InputNames(InputSlots):
        X = 0
        SCALE = 1

    class OutputNames(OutputSlots):
        Y = 0

    block_size: Annotated[list[int], BeforeValidator(lambda v: _int32_list(v, "block_size"))] = (
        Field(default_factory=list)
    )
    is_negative_scale: Annotated[bool, keyword(as_flag, "is_negative_scale")] = False

    set_x, get_x = slot("X")
    set_scale, get_scale = slot("SCALE")
    set_y, get_y = slot("Y")

    def set_block_size(
        self, value: int | Sequence[int], idx: int = 0
    ) -> BlockScaleDequantizeAttributes:
        """The block sizes: a list replaces them all; one integer sets entry ``idx``, padding
        with 1 up to it (a negative ``idx`` changes nothing), as hipDNN's two setters do.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for values that are not 32-bit integers.
        """
        if isinstance(value, Sequence) or hasattr(value, "__iter__"):
            self.block_size = _int32_list(value, "block_size")
            return self
        number, index = int32_value(value, "block_size"), as_index(idx, "idx")
        if index < 0:
            return self
        sizes = list(self.block_size)
        if len(sizes) < index + 1:
            sizes += [1] * (index + 1 - len(sizes))
        sizes[index] = number
        self.block_size = sizes
        return self

    def get_block_size(self) -> list[int]:
        return list(self.block_size)

    set_is_negative_scale, get_is_negative_scale = member(
        "is_negative_scale", as_flag, doc="Mark the scale as negative."
    )
