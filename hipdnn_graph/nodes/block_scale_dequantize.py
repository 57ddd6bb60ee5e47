"""The block-scale dequantize node: rules, inference and wire declaration (hipDNN's
``BlockScaleDequantizeNode``).

hipDNN's rules (``hipdnn_frontend/node/BlockScaleDequantizeNode.hpp`` @ 083f7882), in its order;
see ``docs/spec-families.md`` for the table of checks and messages. Its table rests on a
reconstructed schema (``tests/wire/schemas/block_scale_dequantize_attributes.fbs``).
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.block_scale_dequantize import BlockScaleDequantizeAttributes
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    JSON_SCALARS_ON_NODE,
    Kind,
    ScalarSpec,
    SlotSpec,
)
from ..types import NodeType
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .norm_rules import check_shapes_match_if_set
from .rules import SETTING_PROPERTIES, check_min_dims, invalid, missing, required, take_shape

__all__ = [
    "BLOCK_SCALE_DEQUANTIZE_SPEC",
    "BlockScaleDequantizeAttributeName",
    "BlockScaleDequantizeNode",
]

_LABEL = "BlockScaleDequantizeNode"


class BlockScaleDequantizeNode(Node[BlockScaleDequantizeAttributes]):
    """Dequantizes X with one SCALE element per block: ``Y = X · SCALE[block of the element]``.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.BlockScaleDequantizeAttributes().set_block_size([32])
        ...      .set_x(hg.TensorAttributes(dim=[2, 64], stride=[64, 1]))
        ...      .set_scale(hg.TensorAttributes(dim=[2, 2])).set_y(hg.TensorAttributes()))
        >>> node = hg.BlockScaleDequantizeNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_y().get_dim(), a.get_y().get_stride()
        ([2, 64], [64, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.BLOCK_SCALE_DEQUANTIZE

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, SCALE, Y set; ``block_size`` not empty; X of rank ≥ 1
        (when it has dims); X and Y of one shape (when both have dims); every block size
        positive; no more block sizes than X has dims.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or an empty block size;
                ``INVALID_VALUE`` for the rest.
        """
        a = self.attributes
        x, _, y = required(a, _LABEL, ("x", "scale", "y"))
        blocks = a.block_size
        if not blocks:
            raise missing(f"{_LABEL} block_size must not be empty")
        if x.dim:
            check_min_dims(x, 1, "Input tensor (x)")
            check_shapes_match_if_set(x, y, "Input tensor (x)", "Output tensor (y)")
        for i, size in enumerate(blocks):
            if size <= 0:
                raise invalid(f"{_LABEL} block_size[{i}] must be positive, got {size}")
        if x.dim and len(blocks) > len(x.dim):
            raise invalid(
                f"{_LABEL} block_size has {len(blocks)} entries but input tensor "
                f"has only {len(x.dim)} dimensions"
            )

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims takes X's, Y without strides X's strides.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X or Y.
        """
        a = self.attributes
        x, y = required(a, _LABEL, ("x", "y"), SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        take_shape(y, x)


class BlockScaleDequantizeAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the block-scale dequantize operation descriptor
    (``HipdnnBackendAttributeName.h``, 2807-2812)."""

    OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC = 2807
    OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC = 2808
    OPERATION_BLOCK_SCALE_DEQUANTIZE_YDESC = 2809
    OPERATION_BLOCK_SCALE_DEQUANTIZE_BLOCK_SIZE = 2810
    OPERATION_BLOCK_SCALE_DEQUANTIZE_NEG_SCALE = 2811
    OPERATION_BLOCK_SCALE_DEQUANTIZE_MATH_PREC = 2812


_A = BlockScaleDequantizeAttributeName
_In, _Out = BlockScaleDequantizeAttributes.InputNames, BlockScaleDequantizeAttributes.OutputNames


#: Where every slot and member of a block-scale dequantize node lives on each wire (hipDNN's
#: 5-field ``BlockScaleDequantizeAttributes`` table, reconstructed; JSON uids in
#: ``inputs``/``outputs``, ``block_size`` (``[]`` when empty) and ``is_negative_scale`` on the
#: node object, always written and optional on read, as flatbuffers_sdk's JSON helper does).
BLOCK_SCALE_DEQUANTIZE_SPEC = declare_spec(
    BlockScaleDequantizeNode,
    table="BlockScaleDequantizeAttributes",
    union_tag=13,
    descriptor_type=DescriptorType.OPERATION_BLOCK_SCALE_DEQUANTIZE,
    descriptor_class="BlockScaleDequantizeOperationDescriptor",
    compute_type=_A.OPERATION_BLOCK_SCALE_DEQUANTIZE_MATH_PREC,
    scalar_group=JSON_SCALARS_ON_NODE,
    slots=(
        SlotSpec.named(_In.X, False, True, 0, _A.OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC),
        SlotSpec.named(_In.SCALE, False, True, 1, _A.OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC),
        SlotSpec.named(_Out.Y, True, True, 2, _A.OPERATION_BLOCK_SCALE_DEQUANTIZE_YDESC),
    ),
    scalars=(
        ScalarSpec(
            "block_size",
            Kind.I32_VEC,
            3,
            (_A.OPERATION_BLOCK_SCALE_DEQUANTIZE_BLOCK_SIZE, T.INT32),
            json_presence="read_optional",
        ),
        ScalarSpec(
            "is_negative_scale",
            Kind.BOOL,
            4,
            (_A.OPERATION_BLOCK_SCALE_DEQUANTIZE_NEG_SCALE, T.BOOLEAN),
            always=True,
            json_presence="read_optional",
        ),
    ),
    field_count=5,
)
