"""The weight-gradient convolution node: rules, inference and wire declaration (hipDNN's
``ConvolutionWgradNode``).

hipDNN's rules (``hipdnn_frontend/node/ConvolutionWgradNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from typing import ClassVar

from ..attributes.convolution import ConvWgradAttributes
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import NodeSpec, SlotSpec, register_node_spec
from ..tensor import TensorAttributes
from ..types import NodeType
from .base import Node
from .conv_rules import (
    MIN_RANK,
    PARAMETERS,
    c_div,
    c_mod,
    check_parameter_counts,
    check_parameter_values,
    check_parameters_set,
    dims_and_strides_positive,
    dims_positive,
    invalid,
    missing,
    spatial_parameters,
    strides_like,
)
from .conv_spec import ConvolutionAttributeName, convolution_scalars, convolution_unmodelled
from .input_memo import InputRuleMemo

__all__ = ["CONVOLUTION_WRW_SPEC", "ConvolutionWgradNode"]

_LABEL = "ConvolutionWgradNode"
_DY_RANK = f"{_LABEL}: dy tensor dimension count must match x tensor dimension count"


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
        x, dy, dw = a.get_x(), a.get_dy(), a.get_dw()
        if x is None:
            raise missing(f"{_LABEL} missing x (input) for pre-validation")
        if dy is None:
            raise missing(f"{_LABEL} missing dy (gradient of output) for pre-validation")
        if dw is None:
            raise missing(f"{_LABEL} missing dw (gradient of weights) for pre-validation")
        check_parameters_set(a, _LABEL)
        xd, dyd = x.dim, dy.dim
        if not dims_and_strides_positive(x):
            raise invalid(f"{_LABEL}: x tensor dimensions and strides must be set and positive")
        if len(xd) < MIN_RANK:
            raise invalid(f"{_LABEL}: x tensor must have at least 3 dimensions (N, C, spatial)")
        if not dims_and_strides_positive(dy):
            raise invalid(f"{_LABEL}: dy tensor dimensions and strides must be set and positive")
        if len(dyd) != len(xd):
            raise invalid(
                f"{_LABEL}: dy tensor dimension count must match x tensor dimension count"
            )
        if xd[0] != dyd[0]:
            raise invalid(f"{_LABEL}: x tensor batch size must match dy tensor batch size")
        spatial = len(dyd) - 2
        if dw.dim:
            _check_dw(a, xd, dyd, dw, spatial)
        if dw.stride and not dims_and_strides_positive(dw):
            raise invalid(f"{_LABEL}: dw tensor dimensions and strides must be set and positive")
        check_parameter_counts(a, spatial, _LABEL)
        for i in range(spatial):
            check_parameter_values(
                a.pre_padding[i], a.post_padding[i], a.stride[i], a.dilation[i], _LABEL
            )

    def infer_properties_node(self) -> None:
        """Fill data types; DW without dims gets ``[K, X's C, kernel...]`` (one group: hipDNN
        cannot infer a group count), DW without strides X's memory order (packed).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or X strides,
                ``INVALID_VALUE`` for members that give no kernel size.
        """
        a = self.attributes
        x, dy, dw = a.get_x(), a.get_dy(), a.get_dw()
        if x is None:
            raise missing(f"{_LABEL} missing x for setting properties")
        if dy is None:
            raise missing(f"{_LABEL} missing dy for setting properties")
        if dw is None:
            raise missing(f"{_LABEL} missing dw for setting properties")
        a.fill_from_context(self.graph_attributes)
        if not dw.dim:
            dw.dim = _dw_dims(a, x, dy)
        if not dw.stride:
            if not x.stride:
                raise missing(f"{_LABEL}: Cannot infer dw strides - missing x strides")
            if len(x.stride) != len(dw.dim):
                raise missing(f"{_LABEL}: Stride dimension mismatch between x and dw tensors")
            dw.stride = strides_like(dw.dim, x.stride)


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
    for i in range(spatial):
        if any(i >= len(getattr(a, name)) for name in PARAMETERS):
            check_parameter_counts(a, spatial, _LABEL)
        stride, dilation = a.stride[i], a.dilation[i]
        size, out, kernel = xd[i + 2], dyd[i + 2], dwd[i + 2]
        numerator = size + a.pre_padding[i] + a.post_padding[i] - (dilation * (kernel - 1) + 1)
        if numerator < 0:
            raise invalid(
                f"{_LABEL}: Input spatial dimension at index {i} ({size}) is too small for the "
                f"kernel size ({kernel}) and dilation ({dilation})"
            )
        if stride == 0:
            raise invalid(f"{_LABEL}: Stride must be > 0")
        expected = c_div(numerator, stride) + 1
        if out != expected:
            raise invalid(
                f"{_LABEL}: dy tensor spatial dimension at index {i} ({out}) does not match "
                f"expected dimension ({expected}) given x dimensions, kernel size, padding, "
                "stride, and dilation"
            )


def _dw_dims(a: ConvWgradAttributes, x: TensorAttributes, dy: TensorAttributes) -> list[int]:
    """hipDNN's DW inference. Where hipDNN would index past X's or DY's dims (inference called
    without pre-validation), the pre-validation message is raised instead."""
    xd, dyd = x.dim, dy.dim
    if len(xd) < MIN_RANK:
        raise invalid(f"{_LABEL}: x tensor must have at least 3 dimensions (N, C, spatial)")
    if len(dyd) != len(xd):
        raise invalid(_DY_RANK)
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


_A = ConvolutionAttributeName
_In, _Out = ConvWgradAttributes.InputNames, ConvWgradAttributes.OutputNames

#: Where every slot and member of a weight-gradient convolution lives on each wire (hipDNN's
#: 10-field ``ConvolutionWrwAttributes`` table; its JSON as the forward one's).
CONVOLUTION_WRW_SPEC = register_node_spec(
    NodeSpec(
        table="ConvolutionWrwAttributes",
        union_tag=7,
        label=_LABEL,
        descriptor_type=DescriptorType.OPERATION_CONVOLUTION_BACKWARD_FILTER,
        descriptor_class="ConvolutionWrwOperationDescriptor",
        compute_type=_A.CONVOLUTION_COMP_TYPE,
        scalar_group="parameters",
        slots=(
            SlotSpec(
                _In.X, False, True, 0, _A.OPERATION_CONVOLUTION_BACKWARD_FILTER_X, "x_tensor_uid"
            ),
            SlotSpec(
                _In.DY,
                False,
                True,
                1,
                _A.OPERATION_CONVOLUTION_BACKWARD_FILTER_DY,
                "dy_tensor_uid",
            ),
            SlotSpec(
                _Out.DW,
                True,
                True,
                2,
                _A.OPERATION_CONVOLUTION_BACKWARD_FILTER_DW,
                "dw_tensor_uid",
            ),
        ),
        scalars=convolution_scalars(),
        unmodelled=convolution_unmodelled(),
        field_count=10,
        attributes_cls=ConvWgradAttributes,
        make_node=ConvolutionWgradNode,
    )
)
ConvolutionWgradNode.spec = CONVOLUTION_WRW_SPEC
