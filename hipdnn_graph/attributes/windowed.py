"""What the convolution and resample attributes share: per spatial dim ``pre_padding``,
``post_padding`` and ``stride`` (empty until set), their setters and getters, and the validator
of a per-spatial-dim list.

Example:
    >>> from hipdnn_graph import ConvFpropAttributes, ResampleFwdAttributes
    >>> ConvFpropAttributes().set_stride([2, 2]).get_stride()
    [2, 2]
    >>> ResampleFwdAttributes().set_pre_padding([1, 0]).get_pre_padding()
    [1, 0]
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field

from ..tensor_input import as_int_list
from .accessors import member
from .node_attributes import NodeAttributes

__all__ = ["WindowedAttributes", "int_list_field"]


def int_list_field(what: str) -> BeforeValidator:
    """The validator of a per-spatial-dim list of integers named ``what``."""
    return BeforeValidator(lambda values: as_int_list(values, what))


class WindowedAttributes(NodeAttributes):
    """The padding and stride members of the windowed node families (convolution, resample)."""

    pre_padding: Annotated[list[int], int_list_field("pre_padding")] = Field(default_factory=list)
    post_padding: Annotated[list[int], int_list_field("post_padding")] = Field(default_factory=list)
    stride: Annotated[list[int], int_list_field("stride")] = Field(default_factory=list)

    set_pre_padding, get_pre_padding = member(
        "pre_padding", as_int_list, doc="Padding before each spatial dim."
    )
    set_post_padding, get_post_padding = member(
        "post_padding", as_int_list, doc="Padding after each spatial dim."
    )
    set_stride, get_stride = member(
        "stride", as_int_list, doc="The stride of each spatial dim (of the filter or window)."
    )
