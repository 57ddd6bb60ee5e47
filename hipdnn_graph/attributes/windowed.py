"""What the convolution and resample attributes share: per spatial dim ``pre_padding``,
``post_padding`` and ``stride`` (empty until set), their setters and getters, and the coercion
of a family's mode enum.

Example:
    >>> from hipdnn_graph import ConvFpropAttributes, ResampleFwdAttributes
    >>> ConvFpropAttributes().set_stride([2, 2]).get_stride()
    [2, 2]
    >>> ResampleFwdAttributes().set_pre_padding([1, 0]).get_pre_padding()
    [1, 0]
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import BeforeValidator, Field

from ..tensor_input import as_int_list
from .checks import mode_of
from .node_attributes import NodeAttributes

__all__ = ["WindowedAttributes", "int_list_field", "mode_of"]


def int_list_field(what: str) -> BeforeValidator:
    """The validator of a per-spatial-dim list of integers named ``what``."""
    return BeforeValidator(lambda values: as_int_list(values, what))


class WindowedAttributes(NodeAttributes):
    """The padding and stride members of the windowed node families (convolution, resample)."""

    pre_padding: Annotated[list[int], int_list_field("pre_padding")] = Field(default_factory=list)
    post_padding: Annotated[list[int], int_list_field("post_padding")] = Field(default_factory=list)
    stride: Annotated[list[int], int_list_field("stride")] = Field(default_factory=list)

    def set_pre_padding(self, values: Any) -> Self:
        """Padding before each spatial dim.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for values that are not integers.
        """
        self.pre_padding = as_int_list(values, "pre_padding")
        return self

    def set_post_padding(self, values: Any) -> Self:
        """Padding after each spatial dim.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for values that are not integers.
        """
        self.post_padding = as_int_list(values, "post_padding")
        return self

    def set_stride(self, values: Any) -> Self:
        """The stride of each spatial dim (of the filter, or of the window).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for values that are not integers.
        """
        self.stride = as_int_list(values, "stride")
        return self

    def get_pre_padding(self) -> list[int]:
        return list(self.pre_padding)

    def get_post_padding(self) -> list[int]:
        return list(self.post_padding)

    def get_stride(self) -> list[int]:
        return list(self.stride)
