"""The forward convolution node: rules, inference and wire declaration (hipDNN's
``ConvolutionFpropNode``).

hipDNN's rules (``hipdnn_frontend/node/ConvolutionFpropNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from typing import ClassVar

from ..attributes.convolution import ConvFpropAttributes
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import NodeSpec, SlotSpec, register_node_spec
from ..tensor import TensorAttributes
from ..types import NodeType
from .base import Node
from .conv_rules import (
    MIN_RANK,
    c_div,
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

__all__ = ["CONVOLUTION_FWD_SPEC", "ConvolutionFpropNode"]

_LABEL = "ConvolutionFpropNode"


class ConvolutionFpropNode(Node[ConvFpropAttributes]):
    """Convolves ``X [N, C, spatial...]`` with ``W [K, C/groups, kernel...]`` into
    ``Y [N, K, out...]``, ``out = (in + pre + post - (dilation * (kernel - 1) + 1)) / stride + 1``.

    Example:
        >>> import hipdnn_graph as hg
        >>> x = hg.TensorAttributes(dim=[1, 4, 8, 8], stride=[256, 1, 32, 4])
        >>> w = hg.TensorAttributes(dim=[6, 4, 3, 3], stride=[36, 9, 3, 1])
        >>> a = (hg.ConvFpropAttributes().set_x(x).set_w(w).set_y(hg.TensorAttributes())
        ...      .set_padding([1, 1]).set_stride([2, 2]).set_dilation([1, 1]))
        >>> node = hg.ConvolutionFpropNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_y().get_dim(), a.get_y().get_stride()
        ([1, 6, 4, 4], [96, 1, 24, 6])
    """

    node_type: ClassVar[NodeType] = NodeType.CONVOLUTION_FPROP
    name_prefix: ClassVar[str] = "ConvolutionFprop"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, W, Y set; the four members set; X's dims and strides
        set and positive, rank >= 3; W's too, of X's rank; X's channels divisible by W's and
        W's output channels by the group count; Y's rank, batch, channels and positivity when
        it has dims, its strides when set; one member value per spatial dim; each value in
        range and, when Y has dims, each spatial dim of Y as the formula gives it.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for something missing, ``INVALID_VALUE`` for the
                others.
        """
        a = self.attributes
        x, w, y = a.get_x(), a.get_w(), a.get_y()
        if x is None:
            raise missing(f"{_LABEL} missing x (input) for pre-validation")
        if w is None:
            raise missing(f"{_LABEL} missing w (weights) for pre-validation")
        if y is None:
            raise missing(f"{_LABEL} missing y (output) for pre-validation")
        check_parameters_set(a, _LABEL)
        xd, wd = x.dim, w.dim
        if not dims_and_strides_positive(x):
            raise invalid(f"{_LABEL}: Input tensor dimensions and strides must be set and positive")
        if len(xd) < MIN_RANK:
            raise invalid(f"{_LABEL}: Input tensor must have at least 3 dimensions (N, C, spatial)")
        if not dims_and_strides_positive(w):
            raise invalid(
                f"{_LABEL}: Weight tensor dimensions and strides must be set and positive"
            )
        if len(wd) != len(xd):
            raise invalid(
                f"{_LABEL}: Weight tensor dimension count must match input tensor dimension count"
            )
        if xd[1] % wd[1] != 0:
            raise invalid(
                f"{_LABEL}: Input tensor channels must match weight tensor input channels or be "
                "divisible by them for grouped convolution"
            )
        if wd[0] % (xd[1] // wd[1]) != 0:
            raise invalid(
                f"{_LABEL}: Weight tensor output channels must be divisible by the number of groups"
            )
        yd = y.dim
        if yd:
            if len(yd) != len(xd):
                raise invalid(
                    f"{_LABEL}: Output tensor dimension count must match input tensor dimension "
                    "count"
                )
            if yd[0] != xd[0]:
                raise invalid(
                    f"{_LABEL}: Output tensor batch size must match input tensor batch size"
                )
            if yd[1] != wd[0]:
                raise invalid(
                    f"{_LABEL}: Output tensor channels must match weight tensor output channels"
                )
            if not dims_positive(y):
                raise invalid(f"{_LABEL}: Output tensor dimensions must be set and positive")
        if y.stride and not dims_and_strides_positive(y):
            raise invalid(
                f"{_LABEL}: Output tensor dimensions and strides must be set and positive"
            )
        spatial = len(xd) - 2
        check_parameter_counts(a, spatial, _LABEL)
        for i in range(spatial):
            pre, post = a.pre_padding[i], a.post_padding[i]
            stride, dilation = a.stride[i], a.dilation[i]
            check_parameter_values(pre, post, stride, dilation, _LABEL)
            if not yd:
                continue
            size, kernel, out = xd[i + 2], wd[i + 2], yd[i + 2]
            numerator = size + pre + post - (dilation * (kernel - 1) + 1)
            if numerator < 0:
                raise invalid(
                    f"{_LABEL}: Input spatial dimension at index {i} ({size}) is too small for "
                    f"the kernel size ({kernel}) and dilation ({dilation})"
                )
            expected = numerator // stride + 1
            if out != expected:
                raise invalid(
                    f"{_LABEL}: Output tensor spatial dimension at index {i} ({out}) does not "
                    f"match expected dimension ({expected}) given input dimensions, kernel "
                    "size, padding, stride, and dilation"
                )

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims gets ``[N, K, out...]``, Y without strides X's
        memory order (packed).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or X strides,
                ``INVALID_VALUE`` for members that do not give a positive output size.
        """
        a = self.attributes
        x, w, y = a.get_x(), a.get_w(), a.get_y()
        if x is None:
            raise missing(f"{_LABEL} missing x for setting properties")
        if w is None:
            raise missing(f"{_LABEL} missing w for setting properties")
        if y is None:
            raise missing(f"{_LABEL} missing y for setting properties")
        a.fill_from_context(self.graph_attributes)
        if not y.dim:
            y.dim = _output_dims(a, x, w)
        if not y.stride:
            if not x.stride:
                raise missing(f"{_LABEL}: Cannot infer output strides - missing input strides")
            if not y.dim:
                raise missing(f"{_LABEL}: Cannot infer output strides - missing output dimensions")
            if len(x.stride) != len(y.dim):
                raise missing(
                    f"{_LABEL}: Stride dimension mismatch between input and output tensors"
                )
            y.stride = strides_like(y.dim, x.stride)


def _output_dims(a: ConvFpropAttributes, x: TensorAttributes, w: TensorAttributes) -> list[int]:
    """hipDNN's Y inference. Where hipDNN would index past X's or W's dims (inference called
    without pre-validation), the pre-validation message is raised instead."""
    xd, wd = x.dim, w.dim
    if len(xd) < MIN_RANK:
        raise invalid(f"{_LABEL}: Input tensor must have at least 3 dimensions (N, C, spatial)")
    if len(wd) != len(xd):
        raise invalid(
            f"{_LABEL}: Weight tensor dimension count must match input tensor dimension count"
        )
    dims = [xd[0], wd[0]]
    for i in range(2, len(xd)):
        pre, post, stride, dilation = spatial_parameters(a, i - 2, _LABEL)
        numerator = xd[i] + pre + post - (dilation * (wd[i] - 1) + 1)
        if numerator < 0:
            raise invalid(
                f"{_LABEL}: Invalid convolution parameters result in negative output size"
            )
        dims.append(c_div(numerator, stride) + 1)
    return dims


_A = ConvolutionAttributeName
_In, _Out = ConvFpropAttributes.InputNames, ConvFpropAttributes.OutputNames

#: Where every slot and member of a forward convolution lives on each wire (hipDNN's 10-field
#: ``ConvolutionFwdAttributes`` table; its JSON keeps the uids in ``inputs``/``outputs`` and the
#: members under ``"parameters"``).
CONVOLUTION_FWD_SPEC = register_node_spec(
    NodeSpec(
        table="ConvolutionFwdAttributes",
        union_tag=5,
        label=_LABEL,
        descriptor_type=DescriptorType.OPERATION_CONVOLUTION_FORWARD,
        descriptor_class="ConvolutionFwdOperationDescriptor",
        compute_type=_A.CONVOLUTION_COMP_TYPE,
        scalar_group="parameters",
        slots=(
            SlotSpec(_In.X, False, True, 0, _A.OPERATION_CONVOLUTION_FORWARD_X, "x_tensor_uid"),
            SlotSpec(_In.W, False, True, 1, _A.OPERATION_CONVOLUTION_FORWARD_W, "w_tensor_uid"),
            SlotSpec(_Out.Y, True, True, 2, _A.OPERATION_CONVOLUTION_FORWARD_Y, "y_tensor_uid"),
        ),
        scalars=convolution_scalars(),
        unmodelled=convolution_unmodelled(),
        field_count=10,
        attributes_cls=ConvFpropAttributes,
        make_node=ConvolutionFpropNode,
    )
)
ConvolutionFpropNode.spec = CONVOLUTION_FWD_SPEC
