"""The RMSNorm forward node: rules, inference and wire declaration (hipDNN's ``RMSNormNode``).

hipDNN's rules (``hipdnn_frontend/node/RMSNormNode.hpp``, the normalized-shape version), in
its order; see ``docs/spec-families.md`` for the table of checks and messages. The shape checks
shared with the other norms are in :mod:`.norm_rules`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.rmsnorm import RMSNormAttributes
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    JSON_SCALARS_ON_NODE,
    Kind,
    ScalarSpec,
    SlotSpec,
    WireEnum,
)
from ..types import NodeType, NormFwdPhase
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .norm_rules import (
    check_epsilon_value,
    check_norm_stats_shape_if_set,
    check_scalar_parameter,
    check_scale_normalized_shape,
    check_shapes_match_if_set,
    like_strides,
)
from .rules import SETTING_PROPERTIES, check_min_dims, missing, required, take_shape

__all__ = ["NORM_FWD_PHASE", "RMSNORM_SPEC", "RMSNormAttributeName", "RMSNormNode"]


_LABEL = "RMSNormNode"


class RMSNormNode(Node[RMSNormAttributes]):
    """Normalizes X by the root mean square over the normalized shape (the trailing dims where
    SCALE equals X), scales it and adds an optional BIAS.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.RMSNormAttributes().set_forward_phase(hg.NormFwdPhase.TRAINING)
        ...      .set_x(hg.TensorAttributes(dim=[2, 64, 8, 8], stride=[4096, 64, 8, 1]))
        ...      .set_scale(hg.TensorAttributes(dim=[1, 64, 1, 1]))
        ...      .set_epsilon(hg.TensorAttributes().set_value(1e-5))
        ...      .set_y(hg.TensorAttributes()).set_inv_rms(hg.TensorAttributes()))
        >>> node = hg.RMSNormNode(a, hg.GraphAttributes())
        >>> node.infer_properties_node()
        >>> a.get_y().get_dim(), a.get_inv_rms().get_dim(), a.get_inv_rms().get_stride()
        ([2, 64, 8, 8], [2, 1, 8, 8], [64, 64, 8, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.RMS_NORM

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, SCALE, Y, EPSILON set; X and SCALE of rank >= 2;
        EPSILON a pass-by-value scalar; Y (when it has dims) X's shape; SCALE's normalized shape;
        BIAS (when it has dims) SCALE's shape; the phase set; in training, INV_RMS (when it has
        dims) the statistics shape.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor, epsilon dims or phase;
                ``INVALID_VALUE`` for the shapes.
        """
        a = self.attributes
        x, scale, y, epsilon = required(a, _LABEL, ("x", "scale", "y", "epsilon"))
        check_min_dims(x, 2, "Input tensor (x)")
        check_min_dims(scale, 2, "Scale tensor")
        check_scalar_parameter(epsilon, "Epsilon")
        check_shapes_match_if_set(x, y, "Input tensor (x)", "Output tensor (y)")
        check_scale_normalized_shape(scale, x, "Scale tensor")
        check_shapes_match_if_set(scale, a.get_bias(), "Scale tensor", "Bias tensor")
        if a.forward_phase == NormFwdPhase.NOT_SET:
            raise missing(f"{_LABEL} forward_phase must be set to TRAINING or INFERENCE")
        if a.forward_phase == NormFwdPhase.TRAINING:
            check_norm_stats_shape_if_set(a.get_inv_rms(), x, scale, "Inverse RMS tensor")

    def infer_properties_node(self) -> None:
        """Fill data types; Y takes X's dims and strides; SCALE without strides gets X's layout
        (packed when the ranks differ); in training, INV_RMS without dims gets X's dims with 1
        where SCALE is not 1, and X's layout; BIAS takes SCALE's dims and strides.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X, Y or SCALE.
        """
        a = self.attributes
        x, y, scale = required(a, _LABEL, ("x", "y", "scale"), SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        take_shape(y, x)
        if not scale.stride and scale.dim:
            scale.stride = like_strides(scale.dim, x.stride)
        inv_rms = a.get_inv_rms()
        if a.forward_phase == NormFwdPhase.TRAINING and inv_rms is not None:
            if not inv_rms.dim and len(scale.dim) == len(x.dim):
                inv_rms.dim = [1 if s != 1 else d for d, s in zip(x.dim, scale.dim, strict=True)]
            if not inv_rms.stride:
                inv_rms.stride = like_strides(inv_rms.dim, x.stride)
        bias = a.get_bias()
        if bias is not None:
            take_shape(bias, scale)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """The base checks, then the project's rule after hipDNN's: a constant EPSILON is a
        finite, non-negative float32 number.

        Raises:
            HipdnnError: as :meth:`Node.post_validate_node`; ``INVALID_VALUE`` for the
                epsilon.
        """
        super().post_validate_node(memo)
        check_epsilon_value(self.attributes.get_epsilon(), _LABEL)


class RMSNormAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the RMSNorm operation descriptor
    (``HipdnnBackendAttributeName.h``, 2400-2407)."""

    OPERATION_RMSNORM_X_EXT = 2400
    OPERATION_RMSNORM_SCALE_EXT = 2401
    OPERATION_RMSNORM_EPSILON_EXT = 2402
    OPERATION_RMSNORM_Y_EXT = 2403
    OPERATION_RMSNORM_BIAS_EXT = 2404
    OPERATION_RMSNORM_INV_RMS_EXT = 2405
    OPERATION_RMSNORM_FWD_PHASE_EXT = 2406
    RMSNORM_COMP_TYPE_EXT = 2407


_A = RMSNormAttributeName
_In, _Out = RMSNormAttributes.InputNames, RMSNormAttributes.OutputNames

#: hipDNN's ``NormFwdPhase`` schema enum (``norm_common``): the frontend's numbers; its JSON
#: writes the upper-case names and leaves NOT_SET out.
NORM_FWD_PHASE = WireEnum("NormFwdPhase", NormFwdPhase, {m.value: m.name for m in NormFwdPhase})

#: Where every slot and member of an RMSNorm forward node lives on each wire (hipDNN's 7-field
#: ``RMSNormAttributes`` table; its JSON leaves an absent bias or inv_rms out rather than writing
#: null, and writes ``forward_phase`` on the node object itself, only when set).
RMSNORM_SPEC = declare_spec(
    RMSNormNode,
    table="RMSNormAttributes",
    union_tag=10,
    descriptor_type=DescriptorType.OPERATION_RMSNORM_DESCRIPTOR_EXT,
    descriptor_class="RMSNormOperationDescriptor",
    compute_type=_A.RMSNORM_COMP_TYPE_EXT,
    scalar_group=JSON_SCALARS_ON_NODE,
    nested_json_group="attributes",
    omit_absent_uids=True,
    slots=(
        SlotSpec(_In.X, False, True, 0, _A.OPERATION_RMSNORM_X_EXT, "x_tensor_uid"),
        SlotSpec(_In.SCALE, False, True, 1, _A.OPERATION_RMSNORM_SCALE_EXT, "scale_tensor_uid"),
        SlotSpec(
            _In.EPSILON,
            False,
            True,
            2,
            _A.OPERATION_RMSNORM_EPSILON_EXT,
            "epsilon_tensor_uid",
            pass_by_value=True,
        ),
        SlotSpec(_In.BIAS, False, False, 4, _A.OPERATION_RMSNORM_BIAS_EXT, "bias_tensor_uid"),
        SlotSpec(_Out.Y, True, True, 3, _A.OPERATION_RMSNORM_Y_EXT, "y_tensor_uid"),
        SlotSpec(
            _Out.INV_RMS, True, False, 5, _A.OPERATION_RMSNORM_INV_RMS_EXT, "inv_rms_tensor_uid"
        ),
    ),
    scalars=(
        ScalarSpec(
            "forward_phase",
            Kind.ENUM,
            6,
            (_A.OPERATION_RMSNORM_FWD_PHASE_EXT, T.NORM_FWD_PHASE),
            always=True,
            enum=NORM_FWD_PHASE,
            json_presence="when_set",
        ),
    ),
    field_count=7,
)
