"""The block-scale quantize node: rules, inference and wire declaration (hipDNN's
``BlockScaleQuantizeNode``).

hipDNN's rules (``hipdnn_frontend/node/BlockScaleQuantizeNode.hpp`` @ f8bc0a0e), in its order;
see ``docs/spec-families.md`` for the table of checks and messages. Its table rests on a
reconstructed schema (``tests/wire/schemas/block_scale_quantize_attributes.fbs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import ClassVar

from ..attributes.block_scale_quantize import BlockScaleQuantizeAttributes
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    JSON_SCALARS_ON_NODE,
    Kind,
    ScalarSpec,
    SlotSpec,
)
from ..tensor import TensorAttributes, generate_strides
from ..types import NodeType
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .norm_rules import check_shapes_match_if_set, ordered_strides, stride_order
from .rules import SETTING_PROPERTIES, check_min_dims, invalid, missing, required

__all__ = [
    "BLOCK_SCALE_QUANTIZE_SPEC",
    "BlockScaleQuantizeAttributeName",
    "BlockScaleQuantizeNode",
    "block_axis",
    "transposed_stride_order",
]

_LABEL = "BlockScaleQuantizeNode"


def block_axis(axis: int | None, rank: int) -> int:
    """The dim the blocks run along: ``axis``, or the last dim when it is unset.

    Example:
        >>> block_axis(None, 4), block_axis(1, 4)
        (3, 1)
    """
    return rank - 1 if axis is None else axis


def transposed_stride_order(
    strides: Sequence[int], dims: Sequence[int], axis: int | None
) -> list[int]:
    """hipDNN's stride order for ``transpose``: X's dims from innermost (smallest stride; a dim
    of 1 before another dim of the same stride) outwards, then rotated so that ``axis`` (when set)
    is innermost; the result gives each dim its place (0 = innermost).

    Example:
        >>> transposed_stride_order([64, 16, 1], [2, 4, 16], 1)
        [1, 0, 2]
        >>> transposed_stride_order([64, 16, 1], [2, 4, 16], None)
        [2, 1, 0]
    """
    order = sorted(range(len(strides)), key=lambda i: (strides[i], dims[i] != 1))
    if axis is not None and axis in order:
        at = order.index(axis)
        order = order[at:] + order[:at]
    places = [0] * len(order)
    for place, dim in enumerate(order):
        places[dim] = place
    return places


class BlockScaleQuantizeNode(Node[BlockScaleQuantizeAttributes]):
    """Quantizes X in blocks of ``block_size`` elements along ``axis``: one SCALE per block.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.BlockScaleQuantizeAttributes().set_block_size(32)
        ...      .set_x(hg.TensorAttributes(dim=[2, 64], stride=[64, 1]))
        ...      .set_y(hg.TensorAttributes()).set_scale(hg.TensorAttributes()))
        >>> node = hg.BlockScaleQuantizeNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_y().get_dim(), a.get_scale().get_dim(), a.get_scale().get_stride()
        ([2, 64], [2, 2], [2, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.BLOCK_SCALE_QUANTIZE

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, Y, SCALE set; ``block_size`` set and positive; when X
        has dims: rank ≥ 1, ``axis`` (when set) non-negative and below X's rank, the block dim
        divisible by ``block_size`` (a dim of 0 passes); when X and Y have dims, the same shape.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or block size;
                ``INVALID_VALUE`` for the rest.
        """
        a = self.attributes
        x, y, _ = required(a, _LABEL, ("x", "y", "scale"))
        block = a.block_size
        if block is None:
            raise missing(f"{_LABEL} block_size not set")
        if block <= 0:
            raise invalid(f"{_LABEL} block_size must be positive, got {block}")
        if x.dim:
            check_min_dims(x, 1, "Input tensor (x)")
            rank, axis = len(x.dim), a.axis
            if axis is not None:
                if axis < 0:
                    raise invalid(f"{_LABEL} axis must be non-negative, got {axis}")
                if axis >= rank:
                    raise invalid(f"{_LABEL} axis {axis} exceeds input tensor rank {rank}")
            target = block_axis(axis, rank)
            extent = x.dim[target]
            if extent > 0 and extent % block:
                raise invalid(
                    f"{_LABEL} dimension at axis {target} ({extent}) must be "
                    f"divisible by block_size ({block})"
                )
        if x.dim and y is not None and y.dim:
            check_shapes_match_if_set(x, y, "Input tensor (x)", "Output tensor (y)")

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims takes X's; SCALE without dims takes X's with the block
        dim divided by ``block_size``. Strides left empty are X's layout (Y: X's strides; SCALE:
        X's stride order), with the block dim innermost under ``transpose``, or packed when X
        has no strides.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X, Y or SCALE; ``INVALID_VALUE`` when a
                stride is to follow X's layout but X's strides, X's dims and the tensor's dims
                do not all have one rank (hipDNN leaves that case undefined).
        """
        a = self.attributes
        x, y, scale = required(a, _LABEL, ("x", "y", "scale"), SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        if not y.dim:
            y.dim = list(x.dim)
        if not y.stride:
            if a.transpose and x.stride:
                y.stride = self._like_x(y, transposed=True)
            elif x.stride:
                y.stride = list(x.stride)
            elif y.dim:
                y.stride = generate_strides(y.dim)
        block = a.block_size
        if not scale.dim and x.dim and block is not None and block > 0:
            dims = list(x.dim)
            target = block_axis(a.axis, len(dims))
            if 0 <= target < len(dims):
                dims[target] //= block
            scale.dim = dims
        if not scale.stride and scale.dim:
            if x.stride:
                scale.stride = self._like_x(scale, transposed=a.transpose)
            else:
                scale.stride = generate_strides(scale.dim)

    def _like_x(self, tensor: TensorAttributes, transposed: bool) -> list[int]:
        """Packed strides for ``tensor`` in X's layout (the block dim innermost if
        ``transposed``)."""
        x = self.attributes.get_x()
        assert x is not None
        if not len(x.stride) == len(x.dim) == len(tensor.dim):
            raise invalid(
                f"{_LABEL} cannot infer the strides of {tensor.name or 'a tensor'} "
                f"of rank {len(tensor.dim)} from X's {len(x.stride)} strides and {len(x.dim)} dims"
            )
        if transposed:
            order = transposed_stride_order(x.stride, x.dim, self.attributes.axis)
        else:
            order = stride_order(x.stride)
        return ordered_strides(tensor.dim, order)


class BlockScaleQuantizeAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the block-scale quantize operation descriptor
    (``HipdnnBackendAttributeName.h``, 2800-2806)."""

    OPERATION_BLOCK_SCALE_QUANTIZE_XDESC = 2800
    OPERATION_BLOCK_SCALE_QUANTIZE_YDESC = 2801
    OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC = 2802
    OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE = 2803
    OPERATION_BLOCK_SCALE_QUANTIZE_AXIS_EXT = 2804
    OPERATION_BLOCK_SCALE_QUANTIZE_TRANSPOSE_EXT = 2805
    OPERATION_BLOCK_SCALE_QUANTIZE_MATH_PREC = 2806


_A = BlockScaleQuantizeAttributeName
_In, _Out = BlockScaleQuantizeAttributes.InputNames, BlockScaleQuantizeAttributes.OutputNames


#: Where every slot and member of a block-scale quantize node lives on each wire (hipDNN's
#: 6-field ``BlockScaleQuantizeAttributes`` table, reconstructed; JSON uids in
#: ``inputs``/``outputs``, ``block_size`` and ``axis`` on the node object when set,
#: ``transpose`` always written and optional on read).
BLOCK_SCALE_QUANTIZE_SPEC = declare_spec(
    BlockScaleQuantizeNode,
    table="BlockScaleQuantizeAttributes",
    union_tag=14,
    descriptor_type=DescriptorType.OPERATION_BLOCK_SCALE_QUANTIZE,
    descriptor_class="BlockScaleQuantizeOperationDescriptor",
    compute_type=_A.OPERATION_BLOCK_SCALE_QUANTIZE_MATH_PREC,
    scalar_group=JSON_SCALARS_ON_NODE,
    slots=(
        SlotSpec.named(_In.X, False, True, 0, _A.OPERATION_BLOCK_SCALE_QUANTIZE_XDESC),
        SlotSpec.named(_Out.Y, True, True, 1, _A.OPERATION_BLOCK_SCALE_QUANTIZE_YDESC),
        SlotSpec.named(_Out.SCALE, True, True, 2, _A.OPERATION_BLOCK_SCALE_QUANTIZE_SCALE_DESC),
    ),
    scalars=(
        ScalarSpec(
            "block_size",
            Kind.I32,
            3,
            (_A.OPERATION_BLOCK_SCALE_QUANTIZE_BLOCK_SIZE, T.INT32),
            json_presence="when_set",
            none_is_default=True,
        ),
        ScalarSpec(
            "axis",
            Kind.I64_OPT,
            4,
            (_A.OPERATION_BLOCK_SCALE_QUANTIZE_AXIS_EXT, T.INT64),
            json_presence="when_set",
        ),
        ScalarSpec(
            "transpose",
            Kind.BOOL,
            5,
            (_A.OPERATION_BLOCK_SCALE_QUANTIZE_TRANSPOSE_EXT, T.BOOLEAN),
            always=True,
            json_presence="read_optional",
        ),
    ),
    field_count=6,
)
