"""The layer-norm backward node: rules, inference and wire declaration (hipDNN's
``LayernormBackwardNode``).

hipDNN's rules (``hipdnn_frontend/node/LayernormBackwardNode.hpp``), in its order: the node
checks only that its tensors are set; shapes are the engines' concern. See
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.layernorm_backward import LayernormBackwardAttributes
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
from .norm_rules import check_normalized_dim_count, infer_normalized_dim_count
from .rules import SETTING_PROPERTIES, required, take_shape

__all__ = ["LAYERNORM_BACKWARD_SPEC", "LayernormBackwardAttributeName", "LayernormBackwardNode"]

_LABEL = "LayernormBackwardNode"
#: the tensors hipDNN checks set, in its order, as its pre-validation messages name them
_REQUIRED = (
    "dy (input)", "x (input)", "scale (input)", "dx (output)", "dscale (output)", "dbias (output)"
)  # fmt: skip


class LayernormBackwardNode(Node[LayernormBackwardAttributes]):
    """The gradients of a layer norm: DX, DSCALE and DBIAS.

    Example:
        >>> import hipdnn_graph as hg
        >>> x = lambda: hg.TensorAttributes(dim=[2, 6, 4], stride=[24, 4, 1])
        >>> a = (hg.LayernormBackwardAttributes().set_dy(x()).set_x(x())
        ...      .set_scale(hg.TensorAttributes(dim=[1, 6, 4], stride=[24, 4, 1]))
        ...      .set_dx(hg.TensorAttributes()).set_dscale(hg.TensorAttributes())
        ...      .set_dbias(hg.TensorAttributes()))
        >>> node = hg.LayernormBackwardNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_dx().get_dim(), a.get_dbias().get_stride(), a.get_normalized_dim_count()
        ([2, 6, 4], [24, 4, 1], 2)
    """

    node_type: ClassVar[NodeType] = NodeType.LAYERNORM_BACKWARD

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: DY, X, SCALE, DX, DSCALE and DBIAS set (nothing else).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor.
        """
        required(self.attributes, _LABEL, _REQUIRED)

    def infer_properties_node(self) -> None:
        """Fill data types; DX without dims or strides takes X's; DSCALE and DBIAS without dims
        or strides take SCALE's; a normalized dim count of 0 or less is inferred from SCALE
        (see :func:`~hipdnn_graph.nodes.norm_rules.infer_normalized_dim_count`).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without DY, X, SCALE, DX, DSCALE or DBIAS.
        """
        a = self.attributes
        _, x, scale, dx, dscale, dbias = required(a, _LABEL, _REQUIRED, SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        take_shape(dx, x)
        take_shape(dscale, scale)
        take_shape(dbias, scale)
        if a.normalized_dim_count <= 0:
            a.normalized_dim_count = infer_normalized_dim_count(x.dim, scale.dim)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """The base checks, then the project's rule after hipDNN's: the normalized dim count
        (given, or inferred from SCALE) is between 1 and X's rank (the engines normalize over
        X's last ``normalized_dim_count`` dims).

        Raises:
            HipdnnError: as :meth:`Node.post_validate_node`; ``INVALID_VALUE`` for the count.
        """
        super().post_validate_node(memo)
        a = self.attributes
        x, scale = a.get_x(), a.get_scale()
        assert x is not None and scale is not None  # inference checked them
        check_normalized_dim_count(_LABEL, a.normalized_dim_count, x.dim, scale.dim)


class LayernormBackwardAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the layer-norm backward operation descriptor
    (``HipdnnBackendAttributeName.h``, 3600-3610)."""

    OPERATION_LAYERNORM_BACKWARD_DY_EXT = 3600
    OPERATION_LAYERNORM_BACKWARD_X_EXT = 3601
    OPERATION_LAYERNORM_BACKWARD_SCALE_EXT = 3602
    OPERATION_LAYERNORM_BACKWARD_MEAN_EXT = 3603
    OPERATION_LAYERNORM_BACKWARD_INV_VARIANCE_EXT = 3604
    OPERATION_LAYERNORM_BACKWARD_EPSILON_EXT = 3605
    OPERATION_LAYERNORM_BACKWARD_DX_EXT = 3606
    OPERATION_LAYERNORM_BACKWARD_DSCALE_EXT = 3607
    OPERATION_LAYERNORM_BACKWARD_DBIAS_EXT = 3608
    LAYERNORM_BACKWARD_NORMALIZED_DIM_COUNT_EXT = 3609
    LAYERNORM_BACKWARD_COMP_TYPE_EXT = 3610


_A = LayernormBackwardAttributeName
_In, _Out = LayernormBackwardAttributes.InputNames, LayernormBackwardAttributes.OutputNames


#: Where every slot and member of a layer-norm backward node lives on each wire (hipDNN's
#: 10-field ``LayernormBackwardAttributes`` table; JSON uids in ``inputs``/``outputs``, absent
#: mean, inv_variance and epsilon ``null``, ``normalized_dim_count`` on the node object).
LAYERNORM_BACKWARD_SPEC = declare_spec(
    LayernormBackwardNode,
    table="LayernormBackwardAttributes",
    union_tag=20,
    descriptor_type=DescriptorType.OPERATION_LAYERNORM_BACKWARD_DESCRIPTOR_EXT,
    descriptor_class="LayernormBackwardOperationDescriptor",
    compute_type=_A.LAYERNORM_BACKWARD_COMP_TYPE_EXT,
    scalar_group=JSON_SCALARS_ON_NODE,
    nested_json_group="attributes",
    slots=(
        SlotSpec.named(_In.DY, False, True, 0, _A.OPERATION_LAYERNORM_BACKWARD_DY_EXT),
        SlotSpec.named(_In.X, False, True, 1, _A.OPERATION_LAYERNORM_BACKWARD_X_EXT),
        SlotSpec.named(_In.SCALE, False, True, 2, _A.OPERATION_LAYERNORM_BACKWARD_SCALE_EXT),
        SlotSpec.named(_In.MEAN, False, False, 3, _A.OPERATION_LAYERNORM_BACKWARD_MEAN_EXT),
        SlotSpec.named(
            _In.INV_VARIANCE, False, False, 4, _A.OPERATION_LAYERNORM_BACKWARD_INV_VARIANCE_EXT
        ),
        SlotSpec.named(
            _In.EPSILON,
            False,
            False,
            5,
            _A.OPERATION_LAYERNORM_BACKWARD_EPSILON_EXT,
            pass_by_value=True,
        ),
        SlotSpec.named(_Out.DX, True, True, 6, _A.OPERATION_LAYERNORM_BACKWARD_DX_EXT),
        SlotSpec.named(_Out.DSCALE, True, True, 7, _A.OPERATION_LAYERNORM_BACKWARD_DSCALE_EXT),
        SlotSpec.named(_Out.DBIAS, True, True, 8, _A.OPERATION_LAYERNORM_BACKWARD_DBIAS_EXT),
    ),
    scalars=(
        ScalarSpec(
            "normalized_dim_count",
            Kind.I64,
            9,
            (_A.LAYERNORM_BACKWARD_NORMALIZED_DIM_COUNT_EXT, T.INT64),
            always=True,
        ),
    ),
    field_count=10,
)
