"""The custom op node: rules and wire declaration (hipDNN's ``CustomOpNode``).

hipDNN's rules (``hipdnn_frontend/node/CustomOpNode.hpp``): no input or output tensor may be
null (checked here when the lists are set), inference fills only data types, and post-validation
requires a ``custom_op_id``, then a compute type, then valid output tensors. See
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.custom_op import CustomOpAttributes, InputPosition, OutputPosition
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    JSON_ON_NODE,
    Kind,
    ScalarSpec,
    TensorListSpec,
    UnmodelledSpec,
)
from ..types import NodeType
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .rules import missing

__all__ = ["CUSTOM_OP_SPEC", "CustomOpAttributeName", "CustomOpNode", "custom_op_refusal"]


class CustomOpNode(Node[CustomOpAttributes]):
    """A plugin-defined operation: hipDNN carries its tensors and payload to the plugin that
    its ``custom_op_id`` names.

    Example:
        >>> import hipdnn_graph as hg
        >>> x = hg.TensorAttributes(name="x", dim=[2, 3], stride=[3, 1])
        >>> y = hg.TensorAttributes(name="y", dim=[2, 3], stride=[3, 1])
        >>> a = hg.CustomOpAttributes().set_inputs([x]).set_outputs([y]).set_name("op")
        >>> node = hg.CustomOpNode(a, hg.GraphAttributes(io_data_type=hg.DataType.HALF,
        ...                                              compute_data_type=hg.DataType.FLOAT))
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> y.get_data_type().name
        'HALF'
        >>> try:
        ...     node.post_validate_node()
        ... except hg.HipdnnError as err:
        ...     print(err.code.name, err.message)
        ATTRIBUTE_NOT_SET Node op does not have a custom_op_id set
    """

    node_type: ClassVar[NodeType] = NodeType.CUSTOM_OP
    constants_anywhere: ClassVar[bool] = True

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN checks that no input or output is null; here a null entry is refused when the
        lists are set (:meth:`CustomOpAttributes.set_inputs`), so nothing is left to check."""

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: a ``custom_op_id`` is set; then the compute type and the
        output tensors (and, here, outputs that are tensors of their own).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for no id or no compute type; an output tensor's
                validation error; ``INVALID_VALUE`` for a shared output.
        """
        if not self.attributes.custom_op_id:
            raise missing(f"Node {self.name} does not have a custom_op_id set")
        super().post_validate_node(memo)


def custom_op_refusal(node: CustomOpNode) -> str:
    """Why no engine but the plugin that defines it runs ``node``: hipDNN carries a custom op's
    tensors and payload to that plugin and defines no math for it. Engines that refuse custom
    ops give this reason (the NumPy reference and the torch engines prefix the node's name).

    Example:
        >>> import hipdnn_graph as hg
        >>> node = hg.CustomOpNode(hg.CustomOpAttributes().set_name("op")
        ...                        .set_custom_op_id("example.rope"))
        >>> custom_op_refusal(node)
        "custom op 'example.rope' is plugin-defined: hipDNN defines no math for it"
    """
    op = node.attributes.get_custom_op_id() or "(no custom_op_id)"
    return f"custom op {op!r} is plugin-defined: hipDNN defines no math for it"


class CustomOpAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the custom op operation descriptor
    (``HipdnnBackendAttributeName.h``, 3000-3004)."""

    OPERATION_CUSTOM_OP_INPUTS_EXT = 3000
    OPERATION_CUSTOM_OP_OUTPUTS_EXT = 3001
    OPERATION_CUSTOM_OP_ID_EXT = 3002
    OPERATION_CUSTOM_OP_DATA_EXT = 3003
    CUSTOM_OP_COMP_TYPE_EXT = 3004


_A = CustomOpAttributeName

#: Where everything of a custom op node lives on each wire (hipDNN's 5-field
#: ``CustomOpAttributes`` table, custom_op_attributes.fbs: the id, the input and output uid
#: vectors, the payload, and ``test_generation_marker``, a field of hipDNN's test generator this
#: project does not model; its JSON writes the four others on the node object).
CUSTOM_OP_SPEC = declare_spec(
    CustomOpNode,
    table="CustomOpAttributes",
    union_tag=16,
    descriptor_type=DescriptorType.OPERATION_CUSTOM_OP_DESCRIPTOR_EXT,
    descriptor_class="CustomOpOperationDescriptor",
    compute_type=_A.CUSTOM_OP_COMP_TYPE_EXT,
    scalar_group=JSON_ON_NODE,
    slots=(),
    tensor_lists=(
        TensorListSpec(
            False, 1, _A.OPERATION_CUSTOM_OP_INPUTS_EXT, "input_tensor_uids", InputPosition
        ),
        TensorListSpec(
            True, 2, _A.OPERATION_CUSTOM_OP_OUTPUTS_EXT, "output_tensor_uids", OutputPosition
        ),
    ),
    scalars=(
        ScalarSpec(
            "custom_op_id", Kind.STRING, 0, (_A.OPERATION_CUSTOM_OP_ID_EXT, T.CHAR), always=True
        ),
        ScalarSpec("data", Kind.U8_VEC, 3, (_A.OPERATION_CUSTOM_OP_DATA_EXT, T.CHAR)),
    ),
    unmodelled=(UnmodelledSpec("test_generation_marker", Kind.I32, 4, "extra"),),
    field_count=5,
)
