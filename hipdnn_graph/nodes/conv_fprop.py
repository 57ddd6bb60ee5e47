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
from .conv_rules import ConvolutionNode, ForwardShapes, c_div, spatial_parameters
from .conv_spec import convolution_spec
from .rules import dims_positive, invalid

__all__ = ["CONVOLUTION_FWD_SPEC", "ConvolutionFpropNode"]

_LABEL = "ConvolutionFpropNode"


class ConvolutionFpropNode(ConvolutionNode[ConvFpropAttributes]):
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
    padded_slot: ClassVar[str] = "X"

    roles = ("x (input)", "w (weights)", "y (output)")
    names = ("Input", "Weight", "Output")
    stride_inference_checks_dims = True

    def check_shapes(
        self, xd: list[int], wd: list[int], y: TensorAttributes
    ) -> ForwardShapes | None:
        """X's channels divisible by W's and W's output channels by the group count; Y's rank,
        batch, channels and positivity when it has dims (then each spatial dim of Y as the
        formula gives it, checked with the members).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for the first check that fails.
        """
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
        if not yd:
            return None
        if len(yd) != len(xd):
            raise invalid(
                f"{_LABEL}: Output tensor dimension count must match input tensor dimension count"
            )
        if yd[0] != xd[0]:
            raise invalid(f"{_LABEL}: Output tensor batch size must match input tensor batch size")
        if yd[1] != wd[0]:
            raise invalid(
                f"{_LABEL}: Output tensor channels must match weight tensor output channels"
            )
        if not dims_positive(y):
            raise invalid(f"{_LABEL}: Output tensor dimensions must be set and positive")
        return ForwardShapes(xd, wd, yd, "Output", "input")

    def output_dims(self, xd: list[int], wd: list[int]) -> list[int]:
        """hipDNN's Y inference: ``[N, K, out...]``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for members that do not give a positive output size.
        """
        dims = [xd[0], wd[0]]
        for i in range(2, len(xd)):
            pre, post, stride, dilation = spatial_parameters(self.attributes, i - 2, _LABEL)
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
    ConvolutionFpropNode,
    "ConvolutionFwdAttributes",
    5,
    "FORWARD",
    "ConvolutionFwdOperationDescriptor",
    (_In.X, _In.W, _Out.Y),
)
