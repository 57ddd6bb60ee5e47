"""The data-gradient convolution node: rules, inference and wire declaration (hipDNN's
``ConvolutionDgradNode``).

hipDNN's rules (``hipdnn_frontend/node/ConvolutionDgradNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from typing import ClassVar

from ..attributes.convolution import ConvDgradAttributes
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import NodeSpec, SlotSpec, register_node_spec
from ..tensor import TensorAttributes
from ..types import NodeType
from .base import Node
from .conv_rules import (
    MIN_RANK,
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

__all__ = ["CONVOLUTION_BWD_SPEC", "ConvolutionDgradNode"]

_LABEL = "ConvolutionDgradNode"


class ConvolutionDgradNode(Node[ConvDgradAttributes]):
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
    name_prefix: ClassVar[str] = "ConvolutionDgrad"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: DY, W, DX set; the four members set; DY's dims and strides
        set and positive, rank >= 3; W's too, of DY's rank, its output channels DY's channels;
        DX's rank, batch, grouping and positivity when it has dims, its strides when set; one
        member value per spatial dim; each value in range and, when DX has dims, each spatial
        dim of DY as the forward formula gives it from DX.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for something missing, ``INVALID_VALUE`` for the
                others.
        """
        a = self.attributes
        dy, w, dx = a.get_dy(), a.get_w(), a.get_dx()
        if dy is None:
            raise missing(f"{_LABEL} missing dy (gradient of output) for pre-validation")
        if w is None:
            raise missing(f"{_LABEL} missing w (weights) for pre-validation")
        if dx is None:
            raise missing(f"{_LABEL} missing dx (gradient of input) for pre-validation")
        check_parameters_set(a, _LABEL)
        dyd, wd = dy.dim, w.dim
        if not dims_and_strides_positive(dy):
            raise invalid(f"{_LABEL}: dy tensor dimensions and strides must be set and positive")
        if len(dyd) < MIN_RANK:
            raise invalid(f"{_LABEL}: dy tensor must have at least 3 dimensions (N, C, spatial)")
        if not dims_and_strides_positive(w):
            raise invalid(
                f"{_LABEL}: Weight tensor dimensions and strides must be set and positive"
            )
        if len(wd) != len(dyd):
            raise invalid(
                f"{_LABEL}: Weight tensor dimension count must match dy tensor dimension count"
            )
        if dyd[1] != wd[0]:
            raise invalid(f"{_LABEL}: dy tensor channels must match weight tensor output channels")
        dxd = dx.dim
        if dxd:
            _check_dx(dxd, dyd, wd, dx)
        if dx.stride and not dims_and_strides_positive(dx):
            raise invalid(f"{_LABEL}: dx tensor dimensions and strides must be set and positive")
        spatial = len(dyd) - 2
        check_parameter_counts(a, spatial, _LABEL)
        for i in range(spatial):
            pre, post = a.pre_padding[i], a.post_padding[i]
            stride, dilation = a.stride[i], a.dilation[i]
            check_parameter_values(pre, post, stride, dilation, _LABEL)
            if not dxd:
                continue
            out, kernel, size = dyd[i + 2], wd[i + 2], dxd[i + 2]
            numerator = size + pre + post - (dilation * (kernel - 1) + 1)
            if numerator < 0:
                raise invalid(
                    f"{_LABEL}: Input spatial dimension at index {i} ({size}) is too small for "
                    f"the kernel size ({kernel}) and dilation ({dilation})"
                )
            expected = numerator // stride + 1
            if out != expected:
                raise invalid(
                    f"{_LABEL}: dy tensor spatial dimension at index {i} ({out}) does not match "
                    f"expected dimension ({expected}) given dx dimensions, kernel size, padding, "
                    "stride, and dilation"
                )

    def infer_properties_node(self) -> None:
        """Fill data types; DX without dims gets ``[N, W's C, in...]`` (one group: hipDNN
        cannot infer a group count), DX without strides DY's memory order (packed).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or DY strides,
                ``INVALID_VALUE`` for members that do not give a positive size.
        """
        a = self.attributes
        dy, w, dx = a.get_dy(), a.get_w(), a.get_dx()
        if dy is None:
            raise missing(f"{_LABEL} missing dy for setting properties")
        if w is None:
            raise missing(f"{_LABEL} missing w for setting properties")
        if dx is None:
            raise missing(f"{_LABEL} missing dx for setting properties")
        a.fill_from_context(self.graph_attributes)
        if not dx.dim:
            dx.dim = _dx_dims(a, dy, w)
        if not dx.stride:
            if not dy.stride:
                raise missing(f"{_LABEL}: Cannot infer dx strides - missing dy strides")
            if len(dy.stride) != len(dx.dim):
                raise missing(f"{_LABEL}: Stride dimension mismatch between dy and dx tensors")
            dx.stride = strides_like(dx.dim, dy.stride)


def _check_dx(dxd: list[int], dyd: list[int], wd: list[int], dx: TensorAttributes) -> None:
    """hipDNN's checks of a DX with dims. A DX channel count that makes the group count 0
    (hipDNN would divide by it) fails as the positivity check that follows does."""
    if len(dxd) != len(dyd):
        raise invalid(f"{_LABEL}: dx tensor dimension count must match dy tensor dimension count")
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


def _dx_dims(a: ConvDgradAttributes, dy: TensorAttributes, w: TensorAttributes) -> list[int]:
    """hipDNN's DX inference. Where hipDNN would index past DY's or W's dims (inference called
    without pre-validation), the pre-validation message is raised instead."""
    dyd, wd = dy.dim, w.dim
    if len(dyd) < MIN_RANK:
        raise invalid(f"{_LABEL}: dy tensor must have at least 3 dimensions (N, C, spatial)")
    if len(wd) != len(dyd):
        raise invalid(
            f"{_LABEL}: Weight tensor dimension count must match dy tensor dimension count"
        )
    dims = [dyd[0], wd[1]]
    for i in range(2, len(dyd)):
        pre, post, stride, dilation = spatial_parameters(a, i - 2, _LABEL)
        size = stride * (dyd[i] - 1) + (dilation * (wd[i] - 1) + 1) - pre - post
        if size <= 0:
            raise invalid(
                f"{_LABEL}: Inferred input spatial dimension at index {i} ({size}) is "
                "non-positive. Check padding, stride, and dilation parameters."
            )
        dims.append(size)
    return dims


_A = ConvolutionAttributeName
_In, _Out = ConvDgradAttributes.InputNames, ConvDgradAttributes.OutputNames

#: Where every slot and member of a data-gradient convolution lives on each wire (hipDNN's
#: 10-field ``ConvolutionBwdAttributes`` table; its JSON as the forward one's).
CONVOLUTION_BWD_SPEC = register_node_spec(
    NodeSpec(
        table="ConvolutionBwdAttributes",
        union_tag=6,
        label=_LABEL,
        descriptor_type=DescriptorType.OPERATION_CONVOLUTION_BACKWARD_DATA,
        descriptor_class="ConvolutionBwdOperationDescriptor",
        compute_type=_A.CONVOLUTION_COMP_TYPE,
        scalar_group="parameters",
        slots=(
            SlotSpec(
                _In.DY, False, True, 0, _A.OPERATION_CONVOLUTION_BACKWARD_DATA_DY, "dy_tensor_uid"
            ),
            SlotSpec(
                _In.W, False, True, 1, _A.OPERATION_CONVOLUTION_BACKWARD_DATA_W, "w_tensor_uid"
            ),
            SlotSpec(
                _Out.DX, True, True, 2, _A.OPERATION_CONVOLUTION_BACKWARD_DATA_DX, "dx_tensor_uid"
            ),
        ),
        scalars=convolution_scalars(),
        unmodelled=convolution_unmodelled(),
        field_count=10,
        attributes_cls=ConvDgradAttributes,
        make_node=ConvolutionDgradNode,
    )
)
ConvolutionDgradNode.spec = CONVOLUTION_BWD_SPEC
