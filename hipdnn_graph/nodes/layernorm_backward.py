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
    NodeSpec,
    ScalarSpec,
    SlotSpec,
    register_node_spec,
)
from ..errors import HipdnnError
from ..types import ErrorCode, NodeType
from .base import Node
from .input_memo import InputRuleMemo

__all__ = ["LAYERNORM_BACKWARD_SPEC", "LayernormBackwardAttributeName", "LayernormBackwardNode"]

_LABEL = "LayernormBackwardNode"


def _missing(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.ATTRIBUTE_NOT_SET, message)


def infer_normalized_dim_count(x_dims: list[int], scale_dims: list[int]) -> int:
    """hipDNN's inference of the normalized dim count: with X's rank, the run of trailing SCALE
    dims that are not 1 (at least 1); with another rank, SCALE's rank.

    Example:
        >>> infer_normalized_dim_count([16, 64, 32, 32], [1, 64, 32, 32])
        3
        >>> infer_normalized_dim_count([16, 64, 32, 32], [1, 1, 1, 1])
        1
        >>> infer_normalized_dim_count([16, 64, 32, 32], [32, 32])
        2
    """
    if len(x_dims) != len(scale_dims):
        return len(scale_dims)
    count = 1
    for i in range(len(scale_dims) - 1, -1, -1):
        if scale_dims[i] == 1:
            break
        count = len(scale_dims) - i
    return count


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
    name_prefix: ClassVar[str] = "LayernormBackward"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: DY, X, SCALE, DX, DSCALE and DBIAS set (nothing else).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor.
        """
        a = self.attributes
        for tensor, name, side in (
            (a.get_dy(), "dy", "input"), (a.get_x(), "x", "input"),
            (a.get_scale(), "scale", "input"), (a.get_dx(), "dx", "output"),
            (a.get_dscale(), "dscale", "output"), (a.get_dbias(), "dbias", "output"),
        ):  # fmt: skip
            if tensor is None:
                raise _missing(f"{_LABEL} missing {name} ({side}) for pre-validation")

    def infer_properties_node(self) -> None:
        """Fill data types; DX without dims or strides takes X's; DSCALE and DBIAS without dims
        or strides take SCALE's; a normalized dim count of 0 or less is inferred from SCALE
        (see :func:`infer_normalized_dim_count`).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without DY, X, SCALE, DX, DSCALE or DBIAS.
        """
        a = self.attributes
        x, scale = a.get_x(), a.get_scale()
        dx, dscale, dbias = a.get_dx(), a.get_dscale(), a.get_dbias()
        for tensor, name in (
            (a.get_dy(), "dy"), (x, "x"), (scale, "scale"), (dx, "dx"), (dscale, "dscale"),
            (dbias, "dbias"),
        ):  # fmt: skip
            if tensor is None:
                raise _missing(f"{_LABEL} missing {name} for setting properties")
        assert x is not None and scale is not None
        assert dx is not None and dscale is not None and dbias is not None
        a.fill_from_context(self.graph_attributes)
        if not dx.dim:
            dx.dim = list(x.dim)
        if not dx.stride:
            dx.stride = list(x.stride)
        for grad in (dscale, dbias):
            if not grad.dim:
                grad.dim = list(scale.dim)
            if not grad.stride:
                grad.stride = list(scale.stride)
        if a.normalized_dim_count <= 0:
            a.normalized_dim_count = infer_normalized_dim_count(x.dim, scale.dim)


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
LAYERNORM_BACKWARD_SPEC = register_node_spec(
    NodeSpec(
        table="LayernormBackwardAttributes",
        union_tag=20,
        label=_LABEL,
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
        unmodelled=(),
        field_count=10,
        attributes_cls=LayernormBackwardAttributes,
        make_node=LayernormBackwardNode,
    )
)
LayernormBackwardNode.spec = LAYERNORM_BACKWARD_SPEC
