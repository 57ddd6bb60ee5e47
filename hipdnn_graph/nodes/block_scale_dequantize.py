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
    NodeSpec,
    ScalarSpec,
    SlotSpec,
    register_node_spec,
)
from ..errors import HipdnnError
from ..types import ErrorCode, NodeType
from .base import Node
from .input_memo import InputRuleMemo
from .norm_rules import check_min_dims, check_shapes_match_if_set

__all__ = [
    "BLOCK_SCALE_DEQUANTIZE_SPEC",
    "BlockScaleDequantizeAttributeName",
    "BlockScaleDequantizeNode",
]


def _missing(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.ATTRIBUTE_NOT_SET, message)


def _invalid(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.INVALID_VALUE, message)


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
    name_prefix: ClassVar[str] = "BlockScaleDequantize"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, SCALE, Y set; ``block_size`` not empty; X of rank ≥ 1
        (when it has dims); X and Y of one shape (when both have dims); every block size
        positive; no more block sizes than X has dims.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or an empty block size;
                ``INVALID_VALUE`` for the rest.
        """
        a = self.attributes
        x, scale, y = a.get_x(), a.get_scale(), a.get_y()
        for tensor, name in ((x, "x"), (scale, "scale"), (y, "y")):
            if tensor is None:
                raise _missing(f"BlockScaleDequantizeNode missing {name} for pre-validation")
        assert x is not None
        blocks = a.block_size
        if not blocks:
            raise _missing("BlockScaleDequantizeNode block_size must not be empty")
        if x.dim:
            check_min_dims(x, 1, "Input tensor (x)")
            check_shapes_match_if_set(x, y, "Input tensor (x)", "Output tensor (y)")
        for i, size in enumerate(blocks):
            if size <= 0:
                raise _invalid(
                    f"BlockScaleDequantizeNode block_size[{i}] must be positive, got {size}"
                )
        if x.dim and len(blocks) > len(x.dim):
            raise _invalid(
                f"BlockScaleDequantizeNode block_size has {len(blocks)} entries but input tensor "
                f"has only {len(x.dim)} dimensions"
            )

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims takes X's, Y without strides X's strides.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X or Y.
        """
        a = self.attributes
        x, y = a.get_x(), a.get_y()
        if x is None:
            raise _missing("BlockScaleDequantizeNode missing x for setting properties")
        if y is None:
            raise _missing("BlockScaleDequantizeNode missing y for setting properties")
        a.fill_from_context(self.graph_attributes)
        if not y.dim:
            y.dim = list(x.dim)
        if not y.stride and x.stride:
            y.stride = list(x.stride)


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
BLOCK_SCALE_DEQUANTIZE_SPEC = register_node_spec(
    NodeSpec(
        table="BlockScaleDequantizeAttributes",
        union_tag=13,
        label="BlockScaleDequantizeNode",
        descriptor_type=DescriptorType.OPERATION_BLOCK_SCALE_DEQUANTIZE,
        descriptor_class="BlockScaleDequantizeOperationDescriptor",
        compute_type=_A.OPERATION_BLOCK_SCALE_DEQUANTIZE_MATH_PREC,
        scalar_group=JSON_SCALARS_ON_NODE,
        slots=(
            SlotSpec.named(_In.X, False, True, 0, _A.OPERATION_BLOCK_SCALE_DEQUANTIZE_XDESC),
            SlotSpec.named(
                _In.SCALE, False, True, 1, _A.OPERATION_BLOCK_SCALE_DEQUANTIZE_SCALE_DESC
            ),
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
        unmodelled=(),
        field_count=5,
        attributes_cls=BlockScaleDequantizeAttributes,
        make_node=BlockScaleDequantizeNode,
    )
)
BlockScaleDequantizeNode.spec = BLOCK_SCALE_DEQUANTIZE_SPEC
