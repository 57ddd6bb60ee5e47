"""The weight-gradient convolution node: rules, inference and wire declaration (hipDNN's
``ConvolutionWgradNode``).

hipDNN's rules (``hipdnn_frontend/node/ConvolutionWgradNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from typing import ClassVar

from ..attributes.convolution import ConvWgradAttributes
from ..tensor import TensorAttributes
from ..types import NodeType
from .conv_rules import (
    PARAMETERS,
    ConvolutionNode,
    ForwardShapes,
    c_div,
    c_mod,
    check_forward_size,
    check_parameter_counts,
    spatial_parameters,
)
from .conv_spec import convolution_spec
from .rules import dims_positive, invalid

__all__ = ["CONVOLUTION_WRW_SPEC", "ConvolutionWgradNode"]

_LABEL = "ConvolutionWgradNode"


class ConvolutionWgradNode(ConvolutionNode[ConvWgradAttributes]):
    """The gradient ``DW [K, C/groups, kernel...]`` of a forward convolution's filter from
    ``DY [N, K, out...]`` and the input ``X [N, C, in...]``.

    Example:
        >>> import hipdnn_graph as hg
        >>> dy = hg.TensorAttributes(dim=[1, 6, 4, 4], stride=[96, 16, 4, 1])
        >>> x = hg.TensorAttributes(dim=[1, 4, 8, 8], stride=[256, 1, 32, 4])
        >>> a = (hg.ConvWgradAttributes().set_dy(dy).set_x(x).set_dw(hg.TensorAttributes())
        ...      .set_padding([1, 1]).set_stride([2, 2]).set_dilation([1, 1]))
        >>> node = hg.ConvolutionWgradNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_dw().get_dim(), a.get_dw().get_stride()
        ([6, 4, 4, 4], [64, 1, 16, 4])
    """

    node_type: ClassVar[NodeType] = NodeType.CONVOLUTION_WGRAD
    padded_slot: ClassVar[str] = "X"

    roles = ("x (input)", "dy (gradient of output)", "dw (gradient of weights)")
    names = ("x", "dy", "dw")

    def check_shapes(self, xd: list[int], dyd: list[int], dw: TensorAttributes) -> None:
        """X's batch DY's; DW's rank, channels, grouping, positivity and each spatial dim of DY
        as the forward formula gives it, when DW has dims. hipDNN reads the members here before
        checking their counts, and divides by DW's channels and the stride: where it would read
        past a member or divide by zero, the check it makes later (the count, DW's positivity,
        the stride) fails here instead.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for the first check that fails.
        """
        if xd[0] != dyd[0]:
            raise invalid(f"{_LABEL}: x tensor batch size must match dy tensor batch size")
        dwd, a = dw.dim, self.attributes
        if not dwd:
            return
        if len(dwd) != len(dyd):
            raise invalid(
                f"{_LABEL}: dw tensor dimension count must match dy tensor dimension count"
            )
        if dyd[1] != dwd[0]:
            raise invalid(f"{_LABEL}: dy tensor channels must match dw tensor output channels")
        if dwd[1] == 0:
            raise invalid(f"{_LABEL}: dw tensor dimensions must be set and positive")
        if c_mod(xd[1], dwd[1]) != 0:
            raise invalid(
                f"{_LABEL}: x tensor channels must be divisible by dw tensor input channels"
            )
        groups = c_div(xd[1], dwd[1])
        if groups == 0 or c_mod(dwd[0], groups) != 0:
            raise invalid(
                f"{_LABEL}: dw tensor output channels must be divisible by the number of groups"
            )
        if not dims_positive(dw):
            raise invalid(f"{_LABEL}: dw tensor dimensions must be set and positive")
        shapes, spatial = ForwardShapes(xd, dwd, dyd, "dy", "x"), len(dyd) - 2
        for i in range(spatial):
            if any(i >= len(getattr(a, name)) for name in PARAMETERS):
                check_parameter_counts(a, spatial, _LABEL)
            pre, post = a.pre_padding[i], a.post_padding[i]
            check_forward_size(shapes, i, pre, post, a.stride[i], a.dilation[i], _LABEL)

    def output_dims(self, xd: list[int], dyd: list[int]) -> list[int]:
        """hipDNN's DW inference: ``[K, X's C, kernel...]`` (one group: hipDNN cannot infer a
        group count).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for members that give no kernel size.
        """
        dims = [dyd[1], xd[1]]
        for i in range(2, len(dyd)):
            pre, post, stride, dilation = spatial_parameters(self.attributes, i - 2, _LABEL)
            numerator = xd[i] + pre + post - stride * (dyd[i] - 1) - 1
            if numerator < 0:
                raise invalid(f"{_LABEL}: Invalid spatial dimensions for kernel size inference")
            remainder = numerator % dilation
            if remainder >= stride:
                raise invalid(
                    f"{_LABEL}: Spatial dimensions incompatible with dilation and stride "
                    "parameters for kernel size inference"
                )
            dims.append((numerator - remainder) // dilation + 1)
        return dims


_In, _Out = ConvWgradAttributes.InputNames, ConvWgradAttributes.OutputNames

#: Where every slot and member of a weight-gradient convolution lives on each wire (hipDNN's
#: 10-field ``ConvolutionWrwAttributes`` table; its JSON as the forward one's).
CONVOLUTION_WRW_SPEC = convolution_spec(
    ConvolutionWgradNode,
    "ConvolutionWrwAttributes",
    7,
    "BACKWARD_FILTER",
    "ConvolutionWrwOperationDescriptor",
    (_In.X, _In.DY, _Out.DW),
)
