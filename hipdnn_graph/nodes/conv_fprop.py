"""The forward convolution node: rules, inference and wire declaration (hipDNN's
``ConvolutionFpropNode``).

hipDNN's rules (``hipdnn_frontend/node/ConvolutionFpropNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from typing import ClassVar

from ..attributes.convolution import ConvFpropAttributes
from ..tensor import TensorAttributes
from ..types import NodeType
from .base import Node
from .conv_rules import (
    ForwardShapes,
    c_div,
    check_operands,
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

__all__ = ["CONVOLUTION_FWD_SPEC", "ConvolutionFpropNode"]

_LABEL = "ConvolutionFpropNode"
#: the three tensors, in hipDNN's check order, with what its messages call them
_ROLES = (("x", "input"), ("w", "weights"), ("y", "output"))


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
    padded_slot: ClassVar[str] = "X"

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
        x, w, y = operands(a, _LABEL, _ROLES, "pre-validation")
        check_parameters_set(a, _LABEL)
        check_operands(x, "Input", w, "Weight", _LABEL)
        xd, wd = x.dim, w.dim
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
        if y.stride:
            check_set_and_positive(y, "Output", _LABEL)
        shapes = ForwardShapes(xd, wd, yd, "Output", "input") if yd else None
        check_parameters(a, len(xd) - 2, _LABEL, shapes)

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims gets ``[N, K, out...]``, Y without strides X's
        memory order (packed).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or X strides,
                ``INVALID_VALUE`` for members that do not give a positive output size.
        """
        a = self.attributes
        x, w, y = operands(a, _LABEL, _ROLES, "setting properties")
        a.fill_from_context(self.graph_attributes)
        if not y.dim:
            y.dim = _output_dims(a, x, w)
        infer_strides(y, "output", x, "input", _LABEL, check_dims=True)


def _output_dims(a: ConvFpropAttributes, x: TensorAttributes, w: TensorAttributes) -> list[int]:
    """hipDNN's Y inference. Where hipDNN would index past X's or W's dims (inference called
    without pre-validation), the pre-validation message is raised instead."""
    xd, wd = x.dim, w.dim
    check_ranks(xd, "Input", wd, "Weight", _LABEL)
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


_In, _Out = ConvFpropAttributes.InputNames, ConvFpropAttributes.OutputNames

#: Where every slot and member of a forward convolution lives on each wire (hipDNN's 10-field
#: ``ConvolutionFwdAttributes`` table; its JSON keeps the uids in ``inputs``/``outputs`` and the
#: members under ``"parameters"``).
CONVOLUTION_FWD_SPEC = convolution_spec(
    "ConvolutionFwdAttributes",
    5,
    _LABEL,
    "FORWARD",
    "ConvolutionFwdOperationDescriptor",
    (_In.X, _In.W, _Out.Y),
    ConvFpropAttributes,
    ConvolutionFpropNode,
)
ConvolutionFpropNode.spec = CONVOLUTION_FWD_SPEC
