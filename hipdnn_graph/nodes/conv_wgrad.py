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
from .base import Node
from .conv_rules import (
    PARAMETERS,
    ForwardShapes,
    c_div,
    c_mod,
    check_forward_size,
    check_operands,
    check_parameter_counts,
    check_parameters,
    check_parameters_set,
    check_ranks,
    check_set_and_positive,
    dims_positive,
    infer_strides,
    invalid,
    operands,
    spatial_parameters,
)
from .conv_spec import convolution_spec
from .input_memo import InputRuleMemo

__all__ = ["CONVOLUTION_WRW_SPEC", "ConvolutionWgradNode"]

_LABEL = "ConvolutionWgradNode"
#: the three tensors, in hipDNN's check order, with what its messages call them
_ROLES = (("x", "input"), ("dy", "gradient of output"), ("dw", "gradient of weights"))


class ConvolutionWgradNode(Node[ConvWgradAttributes]):
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
    name_prefix: ClassVar[str] = "ConvolutionWgrad"
    padded_slot: ClassVar[str] = "X"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, DY, DW set; the four members set; X's dims and strides
        set and positive, rank >= 3; DY's too, of X's rank and batch; DW's rank, channels,
        grouping, positivity and each spatial dim of DY as the forward formula gives it, when
        DW has dims; DW's strides when set; one member value per spatial dim; each in range.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for something missing, ``INVALID_VALUE`` for the
                others.
        """
        a = self.attributes
        x, dy, dw = operands(a, _LABEL, _ROLES, "pre-validation")
        check_parameters_set(a, _LABEL)
        check_operands(x, "x", dy, "dy", _LABEL)
        xd, dyd = x.dim, dy.dim
        if xd[0] != dyd[0]:
            raise invalid(f"{_LABEL}: x tensor batch size must match dy tensor batch size")
        spatial = len(dyd) - 2
        if dw.dim:
            _check_dw(a, xd, dyd, dw, spatial)
        if dw.stride:
            check_set_and_positive(dw, "dw", _LABEL)
        check_parameters(a, spatial, _LABEL)

    def infer_properties_node(self) -> None:
        """Fill data types; DW without dims gets ``[K, X's C, kernel...]`` (one group: hipDNN
        cannot infer a group count), DW without strides X's memory order (packed).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or X strides,
                ``INVALID_VALUE`` for members that give no kernel size.
        """
        a = self.attributes
        x, dy, dw = operands(a, _LABEL, _ROLES, "setting properties")
        a.fill_from_context(self.graph_attributes)
        if not dw.dim:
            dw.dim = _dw_dims(a, x, dy)
        infer_strides(dw, "dw", x, "x", _LABEL)


def _check_dw(
    a: ConvWgradAttributes, xd: list[int], dyd: list[int], dw: TensorAttributes, spatial: int
) -> None:
    """hipDNN's checks of a DW with dims. hipDNN reads the members here before checking their
    counts, and divides by DW's channels and the stride: where it would read past a member or
    divide by zero, the check it makes later (the count, DW's positivity, the stride) fails
    here instead."""
    dwd = dw.dim
    if len(dwd) != len(dyd):
        raise invalid(f"{_LABEL}: dw tensor dimension count must match dy tensor dimension count")
    if dyd[1] != dwd[0]:
        raise invalid(f"{_LABEL}: dy tensor channels must match dw tensor output channels")
    if dwd[1] == 0:
        raise invalid(f"{_LABEL}: dw tensor dimensions must be set and positive")
    if c_mod(xd[1], dwd[1]) != 0:
        raise invalid(f"{_LABEL}: x tensor channels must be divisible by dw tensor input channels")
    groups = c_div(xd[1], dwd[1])
    if groups == 0 or c_mod(dwd[0], groups) != 0:
        raise invalid(
            f"{_LABEL}: dw tensor output channels must be divisible by the number of groups"
        )
    if not dims_positive(dw):
        raise invalid(f"{_LABEL}: dw tensor dimensions must be set and positive")
    shapes = ForwardShapes(xd, dwd, dyd, "dy", "x")
    for i in range(spatial):
        if any(i >= len(getattr(a, name)) for name in PARAMETERS):
            check_parameter_counts(a, spatial, _LABEL)
        pre, post = a.pre_padding[i], a.post_padding[i]
        check_forward_size(shapes, i, pre, post, a.stride[i], a.dilation[i], _LABEL)


def _dw_dims(a: ConvWgradAttributes, x: TensorAttributes, dy: TensorAttributes) -> list[int]:
    """hipDNN's DW inference. Where hipDNN would index past X's or DY's dims (inference called
    without pre-validation), the pre-validation message is raised instead."""
    xd, dyd = x.dim, dy.dim
    check_ranks(xd, "x", dyd, "dy", _LABEL)
    dims = [dyd[1], xd[1]]
    for i in range(2, len(dyd)):
        pre, post, stride, dilation = spatial_parameters(a, i - 2, _LABEL)
        numerator = xd[i] + pre + post - stride * (dyd[i] - 1) - 1
        if numerator < 0:
            raise invalid(f"{_LABEL}: Invalid spatial dimensions for kernel size inference")
        remainder = numerator % dilation
        if remainder >= stride:
            raise invalid(
                f"{_LABEL}: Spatial dimensions incompatible with dilation and stride parameters "
                "for kernel size inference"
            )
        dims.append((numerator - remainder) // dilation + 1)
    return dims


_In, _Out = ConvWgradAttributes.InputNames, ConvWgradAttributes.OutputNames

#: Where every slot and member of a weight-gradient convolution lives on each wire (hipDNN's
#: 10-field ``ConvolutionWrwAttributes`` table; its JSON as the forward one's).
CONVOLUTION_WRW_SPEC = convolution_spec(
    "ConvolutionWrwAttributes",
    7,
    _LABEL,
    "BACKWARD_FILTER",
    "ConvolutionWrwOperationDescriptor",
    (_In.X, _In.DY, _Out.DW),
    ConvWgradAttributes,
    ConvolutionWgradNode,
)
ConvolutionWgradNode.spec = CONVOLUTION_WRW_SPEC
