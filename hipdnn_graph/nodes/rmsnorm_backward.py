"""The RMSNorm backward node: rules, inference and wire declaration (hipDNN's
``RMSNormBackwardNode``).

hipDNN's rules (``hipdnn_frontend/node/RMSNormBackwardNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages. The shape checks shared with the
other norms are in :mod:`.norm_rules`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.rmsnorm_backward import RMSNormBackwardAttributes
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import SlotSpec
from ..types import NodeType
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .norm_rules import (
    check_norm_stats_shape_if_set,
    check_scale_normalized_shape,
    check_shapes_match,
    check_shapes_match_if_set,
    like_strides,
)
from .rules import SETTING_PROPERTIES, check_min_dims, required, take_shape

__all__ = ["RMSNORM_BACKWARD_SPEC", "RMSNormBackwardAttributeName", "RMSNormBackwardNode"]

_LABEL = "RMSNormBackwardNode"
#: the tensors hipDNN checks set, in its order, as its pre-validation messages name them
_REQUIRED = ("dy (input)", "x (input)", "scale (input)", "dx (output)", "dscale (output)")


class RMSNormBackwardNode(Node[RMSNormBackwardAttributes]):
    """The gradients of an RMSNorm: DX, DSCALE and (optionally) DBIAS.

    Example:
        >>> import hipdnn_graph as hg
        >>> x = lambda: hg.TensorAttributes(dim=[2, 6, 4], stride=[24, 4, 1])
        >>> a = (hg.RMSNormBackwardAttributes().set_dy(x()).set_x(x())
        ...      .set_scale(hg.TensorAttributes(dim=[1, 1, 4], stride=[4, 4, 1]))
        ...      .set_inv_rms(hg.TensorAttributes(dim=[2, 6, 1]))
        ...      .set_dx(hg.TensorAttributes()).set_dscale(hg.TensorAttributes()))
        >>> node = hg.RMSNormBackwardNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_dx().get_dim(), a.get_dscale().get_dim(), a.get_dscale().get_stride()
        ([2, 6, 4], [1, 1, 4], [4, 4, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.RMS_NORM_BACKWARD

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: DY, X, SCALE, DX, DSCALE set; X, DY, SCALE of rank >= 2;
        DY X's shape; DX (when it has dims) X's shape; SCALE's normalized shape; DSCALE (when it
        has dims) SCALE's shape; INV_RMS (when it has dims) the statistics shape.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor; ``INVALID_VALUE`` for the
                shapes.
        """
        a = self.attributes
        dy, x, scale, dx, dscale = required(a, _LABEL, _REQUIRED)
        check_min_dims(x, 2, "Input tensor (x)")
        check_min_dims(dy, 2, "Gradient input tensor (dy)")
        check_min_dims(scale, 2, "Scale tensor")
        check_shapes_match(x, dy, "Input tensor (x)", "Gradient input tensor (dy)")
        check_shapes_match_if_set(x, dx, "Input tensor (x)", "Gradient output tensor (dx)")
        check_scale_normalized_shape(scale, x, "Scale tensor")
        # hipDNN names the pair with X's and DX's fallbacks here (its message, to the letter)
        check_shapes_match_if_set(scale, dscale, "Input tensor (x)", "Gradient output tensor (dx)")
        check_norm_stats_shape_if_set(a.get_inv_rms(), x, scale, "Inverse RMS tensor")

    def infer_properties_node(self) -> None:
        """Fill data types; DX without dims or strides takes DY's; DSCALE and a set DBIAS
        without dims take SCALE's, without strides SCALE's layout.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without DY, X, SCALE, DX or DSCALE.
        """
        a = self.attributes
        dy, _, scale, dx, dscale = required(a, _LABEL, _REQUIRED, SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        take_shape(dx, dy)
        dbias = a.get_dbias()
        for grad in (dscale, dbias):
            if grad is None:
                continue
            if not grad.dim:
                grad.dim = list(scale.dim)
            if not grad.stride:
                grad.stride = like_strides(grad.dim, scale.stride)


class RMSNormBackwardAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the RMSNorm backward operation descriptor
    (``HipdnnBackendAttributeName.h``, 3500-3507)."""

    OPERATION_RMSNORM_BACKWARD_DY_EXT = 3500
    OPERATION_RMSNORM_BACKWARD_X_EXT = 3501
    OPERATION_RMSNORM_BACKWARD_SCALE_EXT = 3502
    OPERATION_RMSNORM_BACKWARD_INV_RMS_EXT = 3503
    OPERATION_RMSNORM_BACKWARD_DX_EXT = 3504
    OPERATION_RMSNORM_BACKWARD_DSCALE_EXT = 3505
    OPERATION_RMSNORM_BACKWARD_DBIAS_EXT = 3506
    RMSNORM_BACKWARD_COMP_TYPE_EXT = 3507


_A = RMSNormBackwardAttributeName
_In, _Out = RMSNormBackwardAttributes.InputNames, RMSNormBackwardAttributes.OutputNames


#: Where every slot of an RMSNorm backward node lives on each wire (hipDNN's 7-field
#: ``RMSNormBackwardAttributes`` table; inv_rms a required uid, dbias optional; JSON uids in
#: ``inputs``/``outputs``, an absent dbias left out).
RMSNORM_BACKWARD_SPEC = declare_spec(
    RMSNormBackwardNode,
    table="RMSNormBackwardAttributes",
    union_tag=17,
    descriptor_type=DescriptorType.OPERATION_RMSNORM_BACKWARD_DESCRIPTOR_EXT,
    descriptor_class="RMSNormBackwardOperationDescriptor",
    compute_type=_A.RMSNORM_BACKWARD_COMP_TYPE_EXT,
    scalar_group="",
    omit_absent_uids=True,
    slots=(
        SlotSpec.named(_In.DY, False, True, 0, _A.OPERATION_RMSNORM_BACKWARD_DY_EXT),
        SlotSpec.named(_In.X, False, True, 1, _A.OPERATION_RMSNORM_BACKWARD_X_EXT),
        SlotSpec.named(_In.SCALE, False, True, 2, _A.OPERATION_RMSNORM_BACKWARD_SCALE_EXT),
        SlotSpec.named(_In.INV_RMS, False, True, 3, _A.OPERATION_RMSNORM_BACKWARD_INV_RMS_EXT),
        SlotSpec.named(_Out.DX, True, True, 4, _A.OPERATION_RMSNORM_BACKWARD_DX_EXT),
        SlotSpec.named(_Out.DSCALE, True, True, 5, _A.OPERATION_RMSNORM_BACKWARD_DSCALE_EXT),
        SlotSpec.named(_Out.DBIAS, True, False, 6, _A.OPERATION_RMSNORM_BACKWARD_DBIAS_EXT),
    ),
    field_count=7,
)
