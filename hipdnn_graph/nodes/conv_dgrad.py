"""The data-gradient convolution node: rules, inference and wire declaration (hipDNN's
``ConvolutionDgradNode``).

hipDNN's rules (``hipdnn_frontend/node/ConvolutionDgradNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from typing import ClassVar

from ..attributes.convolution import ConvDgradAttributes
from ..tensor import TensorAttributes
from ..types import NodeType
from .conv_rules import ConvolutionNode, ForwardShapes, c_div, c_mod, spatial_parameters
from .conv_spec import convolution_spec
from .rules import dims_positive, invalid

__all__ = ["CONVOLUTION_BWD_SPEC", "ConvolutionDgradNode"]

_LABEL = "ConvolutionDgradNode"


class ConvolutionDgradNode(ConvolutionNode[ConvDgradAttributes]):
    """The gradient ``DX [N, C, in...]`` of a forward convolution's input from
    ``DY [N, K, out...]`` and the filter ``W [K, C/groups, kernel...]``.

    Example:
        >>> import hipdnn_graph as hg
        >>> dy = hg.TensorAttributes(dim=[1, 6, 4, 4], stride=[96, 16, 4, 1])
        >>> w = hg.TensorAttributes(dim=[6, 4, 3, 3], stride=[36, 9, 3, 1])
        >>> a = (hg.ConvDgradAttributes().set_dy(dy).set_w(w).set_dx(hg.TensorAttributes())
        ...      .set_padding([1, 1]).set_stride([2, 2]).set_dilation([1, 1]))
        >>> node = hg.ConvolutionDgradNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_dx().get_dim(), a.get_dx().get_stride()
        ([1, 4, 7, 7], [196, 49, 7, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.CONVOLUTION_DGRAD
    padded_slot: ClassVar[str] = "DX"

    roles = ("dy (gradient of output)", "w (weights)", "dx (gradient of input)")
    names = ("dy", "Weight", "dx")

    def check_shapes(
        self, dyd: list[int], wd: list[int], dx: TensorAttributes
    ) -> ForwardShapes | None:
        """W's output channels DY's channels; DX's rank, batch, grouping and positivity when it
        has dims (then each spatial dim of DY as the forward formula gives it from DX, checked
        with the members). A DX channel count that makes the group count 0 (hipDNN would divide
        by it) fails as the positivity check that follows does.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for the first check that fails.
        """
        if dyd[1] != wd[0]:
            raise invalid(f"{_LABEL}: dy tensor channels must match weight tensor output channels")
        dxd = dx.dim
        if not dxd:
            return None
        if len(dxd) != len(dyd):
            raise invalid(
                f"{_LABEL}: dx tensor dimension count must match dy tensor dimension count"
            )
        if dxd[0] != dyd[0]:
            raise invalid(f"{_LABEL}: dx tensor batch size must match dy tensor batch size")
        if c_mod(dxd[1], wd[1]) != 0:
            raise invalid(
                f"{_LABEL}: dx tensor channels must be divisible by weight tensor input channels"
            )
        groups = c_div(dxd[1], wd[1])
        if groups == 0:
            raise invalid(f"{_LABEL}: dx tensor dimensions must be set and positive")
        if c_mod(wd[0], groups) != 0:
            raise invalid(
                f"{_LABEL}: Weight tensor output channels must be divisible by the number of groups"
            )
        if not dims_positive(dx):
            raise invalid(f"{_LABEL}: dx tensor dimensions must be set and positive")
        return ForwardShapes(dxd, wd, dyd, "dy", "dx")

    def output_dims(self, dyd: list[int], wd: list[int]) -> list[int]:
        """hipDNN's DX inference: ``[N, W's C, in...]`` (one group: hipDNN cannot infer a group
        count).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for members that do not give a positive size.
        """
        dims = [dyd[0], wd[1]]
        for i in range(2, len(dyd)):
            pre, post, stride, dilation = spatial_parameters(self.attributes, i - 2, _LABEL)
            size = stride * (dyd[i] - 1) + (dilation * (wd[i] - 1) + 1) - pre - post
            if size <= 0:
                raise invalid(
                    f"{_LABEL}: Inferred input spatial dimension at index {i} ({size}) is "
                    "non-positive. Check padding, stride, and dilation parameters."
                )
            dims.append(size)
        return dims


_In, _Out = ConvDgradAttributes.InputNames, ConvDgradAttributes.OutputNames

#: Where every slot and member of a data-gradient convolution lives on each wire (hipDNN's
#: 10-field ``ConvolutionBwdAttributes`` table; its JSON as the forward one's).
CONVOLUTION_BWD_SPEC = convolution_spec(
    ConvolutionDgradNode,
    "ConvolutionBwdAttributes",
    6,
    "BACKWARD_DATA",
    "ConvolutionBwdOperationDescriptor",
    (_In.DY, _In.W, _Out.DX),
)
