"""The reduction node: rules, inference and wire declaration (hipDNN's ``ReductionNode``).

hipDNN's rules (``hipdnn_frontend/node/ReductionNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages. hipDNN infers nothing for a
reduction but data types: Y's dims say which axes reduce, so the caller sets them.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import ClassVar

from ..attributes.reduction import ReductionAttributes
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    JSON_ON_NODE,
    Kind,
    ScalarSpec,
    SlotSpec,
    WireEnum,
)
from ..types import NodeType, ReductionMode
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .rules import invalid, missing

__all__ = ["REDUCTION_MODE", "REDUCTION_SPEC", "ReductionAttributeName", "ReductionNode"]


def check_reduced_dims(x_dims: Sequence[int], y_dims: Sequence[int]) -> None:
    """hipDNN's shape rule: same rank; each Y dim equal to X's or, when smaller, 1; at least one
    smaller.

    Raises:
        HipdnnError: ``INVALID_VALUE`` naming the first offending index.

    Example:
        >>> from hipdnn_graph import HipdnnError
        >>> check_reduced_dims([4, 8], [1, 8])
        >>> try:
        ...     check_reduced_dims([4, 8], [2, 8])
        ... except HipdnnError as err:
        ...     print(err.message)
        ReductionNode: Y dim[0]=2 is less than X dim[0]=4 but is not 1
    """
    if len(x_dims) != len(y_dims):
        raise invalid(
            f"ReductionNode: X and Y must have the same rank. X rank={len(x_dims)}, "
            f"Y rank={len(y_dims)}"
        )
    reduces = False
    for i, (x, y) in enumerate(zip(x_dims, y_dims, strict=True)):
        if y < x:
            if y != 1:
                raise invalid(
                    f"ReductionNode: Y dim[{i}]={y} is less than X dim[{i}]={x} but is not 1"
                )
            reduces = True
        elif y > x:
            raise invalid(f"ReductionNode: Y dim[{i}]={y} exceeds X dim[{i}]={x}")
    if not reduces:
        raise invalid(
            "ReductionNode: Y dims must be strictly smaller than X dims in at least one dimension"
        )


class ReductionNode(Node[ReductionAttributes]):
    """Reduces ``X`` to ``Y`` along every dim where ``Y`` is 1 and ``X`` is not.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.ReductionAttributes().set_mode(hg.ReductionMode.ADD)
        ...      .set_x(hg.TensorAttributes(dim=[4, 8])).set_y(hg.TensorAttributes(dim=[1, 8])))
        >>> node = hg.ReductionNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node()
        >>> _ = a.get_y().set_dim([1, 1, 8])
        >>> try:
        ...     node.pre_validate_node()
        ... except hg.HipdnnError as err:
        ...     print(err.message)
        ReductionNode: X and Y must have the same rank. X rank=2, Y rank=3
    """

    node_type: ClassVar[NodeType] = NodeType.REDUCTION

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, Y and the mode set; then, when X and Y both have dims,
        :func:`check_reduced_dims`.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or mode, ``INVALID_VALUE``
                for the shapes.
        """
        a = self.attributes
        x, y = a.get_x(), a.get_y()
        if x is None:
            raise missing("ReductionNode missing input X for pre-validation")
        if y is None:
            raise missing("ReductionNode missing output Y for pre-validation")
        if a.mode == ReductionMode.NOT_SET:
            raise missing("ReductionNode missing mode for pre-validation")
        if x.dim and y.dim:
            check_reduced_dims(x.dim, y.dim)

    def infer_properties_node(self) -> None:
        """Fill data types from the graph (hipDNN infers no dims or strides for Y)."""
        self.attributes.fill_from_context(self.graph_attributes)


class ReductionAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the reduction operation descriptor
    (``HipdnnBackendAttributeName.h``, 3200-3204)."""

    OPERATION_REDUCTION_XDESC = 3200
    OPERATION_REDUCTION_YDESC = 3201
    REDUCTION_OPERATOR = 3202
    REDUCTION_COMP_TYPE = 3203
    REDUCTION_IS_DETERMINISTIC = 3204


_A = ReductionAttributeName
_In, _Out = ReductionAttributes.InputNames, ReductionAttributes.OutputNames

#: hipDNN's ``ReductionMode`` schema enum: the frontend's numbers; its JSON writes the lower-case
#: names, ``MIN``/``MAX`` (``MIN_OP``/``MAX_OP`` in the schema) as ``"min"``/``"max"`` and
#: NOT_SET as ``"not_set"``; the upper-case names (``"ADD"``, ``"MIN"``) of hipDNN's
#: ``hipdnn_data_sdk`` JSON helper and its benchmark graphs are read too.
REDUCTION_MODE = WireEnum(
    "ReductionMode",
    ReductionMode,
    {m.value: m.name.lower() for m in ReductionMode},
    aliases={m.name: m.value for m in ReductionMode},
)

#: Where every slot and member of a reduction node lives on each wire (hipDNN's 4-field
#: ``ReductionAttributes`` table; its JSON writes the uids and members on the node object itself,
#: ``is_deterministic`` optional on read).
REDUCTION_SPEC = declare_spec(
    ReductionNode,
    table="ReductionAttributes",
    union_tag=18,
    descriptor_type=DescriptorType.OPERATION_REDUCTION,
    descriptor_class="ReductionOperationDescriptor",
    compute_type=_A.REDUCTION_COMP_TYPE,
    scalar_group=JSON_ON_NODE,
    nested_json_group="attributes",
    slots=(
        SlotSpec(_In.X, False, True, 1, _A.OPERATION_REDUCTION_XDESC, "in_tensor_uid"),
        SlotSpec(_Out.Y, True, True, 2, _A.OPERATION_REDUCTION_YDESC, "out_tensor_uid"),
    ),
    scalars=(
        ScalarSpec(
            "mode",
            Kind.ENUM,
            0,
            (_A.REDUCTION_OPERATOR, T.REDUCTION_MODE),
            always=True,
            enum=REDUCTION_MODE,
        ),
        ScalarSpec(
            "is_deterministic",
            Kind.BOOL,
            3,
            (_A.REDUCTION_IS_DETERMINISTIC, T.BOOLEAN),
            always=True,
            json_presence="read_optional",
        ),
    ),
    field_count=4,
)
