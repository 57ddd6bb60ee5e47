"""Attributes of the convolution nodes (hipDNN's ``ConvFpropAttributes``,
``ConvDgradAttributes`` and ``ConvWgradAttributes``).

Example:
    >>> from hipdnn_graph import ConvFpropAttributes, ConvolutionMode
    >>> a = ConvFpropAttributes().set_padding([1, 1]).set_stride([2, 2]).set_dilation([1, 1])
    >>> a.get_pre_padding(), a.get_post_padding(), a.get_convolution_mode().name
    ([1, 1], [1, 1], 'CROSS_CORRELATION')
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import Field

from ..tensor_input import as_int_list, keyword
from ..types import ConvolutionMode
from .accessors import member, slot
from .checks import enum_check
from .node_attributes import InputSlots, OutputSlots
from .windowed import WindowedAttributes, int_list_field

__all__ = [
    "ConvDgradAttributes",
    "ConvFpropAttributes",
    "ConvWgradAttributes",
    "ConvolutionAttributes",
]


#: ``(value, what) -> ConvolutionMode`` (a member or its number; not a bool)
_mode = enum_check(ConvolutionMode)


class ConvolutionAttributes(WindowedAttributes):
    """The members the three convolution nodes share: per spatial dim ``pre_padding``,
    ``post_padding``, ``stride`` and ``dilation`` (empty until set), and ``convolution_mode``
    (hipDNN's ``math_mode``, ``CROSS_CORRELATION`` unless set)."""

    dilation: Annotated[list[int], int_list_field("dilation")] = Field(default_factory=list)
    convolution_mode: Annotated[ConvolutionMode, keyword(_mode, "convolution mode")] = (
        ConvolutionMode.CROSS_CORRELATION
    )

    def set_padding(self, values: Any) -> Self:
        """Set both pre- and post-padding.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for values that are not integers.
        """
        padding = as_int_list(values, "padding")
        self.pre_padding, self.post_padding = padding, list(padding)
        return self

    set_dilation, get_dilation = member(
        "dilation", as_int_list, doc="The dilation of each spatial dim."
    )
    set_convolution_mode, get_convolution_mode = member(
        "convolution_mode",
        _mode,
        "convolution mode",
        doc="Cross-correlation (the default) or true convolution.",
    )


class ConvFpropAttributes(ConvolutionAttributes):
    """Configuration of a forward convolution: ``Y = conv(X, W)``.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | X | [N, C, spatial...] | | Y | [N, K, out...] (inferred) |
    | W | [K, C/groups, kernel...] | | | |
    """

    class InputNames(InputSlots):
        X = 0
        W = 1

    class OutputNames(OutputSlots):
        Y = 0

    set_x, get_x = slot("X")
    set_w, get_w = slot("W")
    set_y, get_y = slot("Y")


class ConvDgradAttributes(ConvolutionAttributes):
    """Configuration of a data-gradient convolution: ``DX = conv_dgrad(DY, W)``, the gradient of
    a forward convolution's input.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | DY | [N, K, out...] | | DX | [N, C, in...] (inferred, one group) |
    | W | [K, C/groups, kernel...] | | | |
    """

    class InputNames(InputSlots):
        DY = 0
        W = 1

    class OutputNames(OutputSlots):
        DX = 0

    set_dy, get_dy = slot("DY")
    set_w, get_w = slot("W")
    set_dx, get_dx = slot("DX")


class ConvWgradAttributes(ConvolutionAttributes):
    """Configuration of a weight-gradient convolution: ``DW = conv_wgrad(DY, X)``, the gradient
    of a forward convolution's filter.

    | input slot | shape | | output slot | shape |
    |---|---|---|---|---|
    | DY | [N, K, out...] | | DW | [K, C, kernel...] (inferred, one group) |
    | X | [N, C, in...] | | | |
    """

    class InputNames(InputSlots):
        DY = 0
        X = 1

    class OutputNames(OutputSlots):
        DW = 0

    set_dy, get_dy = slot("DY")
    set_x, get_x = slot("X")
    set_dw, get_dw = slot("DW")
