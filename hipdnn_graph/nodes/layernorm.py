"""The layer-norm forward node: rules, inference and wire declaration (hipDNN's
``LayerNormNode``).

hipDNN's rules (``hipdnn_frontend/node/LayerNormNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages. The shape checks shared with the
other norms are in :mod:`.norm_rules`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.layernorm import LayernormAttributes
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    JSON_SCALARS_ON_NODE,
    Kind,
    ScalarSpec,
    SlotSpec,
    WireEnum,
)
from ..tensor import generate_strides
from ..types import NodeType, NormFwdPhase
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .norm_rules import (
    check_epsilon_value,
    check_normalized_dim_count,
    check_scalar_parameter,
    check_shapes_match_if_set,
    like_strides,
)
from .rules import SETTING_PROPERTIES, check_min_dims, missing, required

__all__ = ["LAYERNORM_SPEC", "LayerNormNode", "LayernormAttributeName"]


_LABEL = "LayerNormNode"


class LayerNormNode(Node[LayernormAttributes]):
    """Normalizes X by its mean and variance over the normalized dims, then scales and shifts.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.LayernormAttributes().set_forward_phase(hg.NormFwdPhase.TRAINING)
        ...      .set_x(hg.TensorAttributes(dim=[2, 6, 4], stride=[24, 4, 1]))
        ...      .set_scale(hg.TensorAttributes()).set_bias(hg.TensorAttributes())
        ...      .set_epsilon(hg.TensorAttributes().set_value(1e-5))
        ...      .set_y(hg.TensorAttributes()).set_mean(hg.TensorAttributes()))
        >>> node = hg.LayerNormNode(a, hg.GraphAttributes())
        >>> node.infer_properties_node()
        >>> a.get_scale().get_dim(), a.get_mean().get_dim(), a.get_mean().get_stride()
        ([1, 6, 4], [2, 1, 1], [1, 1, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.LAYER_NORM
    name_prefix: ClassVar[str] = "Layernorm"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: the phase set; X, Y, EPSILON, SCALE, BIAS set; X of rank
        >= 1; EPSILON a pass-by-value scalar; Y (when it has dims) X's shape; SCALE and BIAS of
        rank >= 1 and (BIAS with dims) of one shape.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for the phase, a missing tensor or epsilon dims;
                ``INVALID_VALUE`` for the shapes.
        """
        a = self.attributes
        if a.forward_phase == NormFwdPhase.NOT_SET:
            raise missing("Forward phase not set of layernorm node.")
        x, y, epsilon, scale, bias = required(a, _LABEL, ("x", "y", "epsilon", "scale", "bias"))
        check_min_dims(x, 1, "Input tensor (x)")
        check_scalar_parameter(epsilon, "Epsilon")
        check_shapes_match_if_set(x, y, "Input tensor (x)", "Output tensor (y)")
        check_min_dims(scale, 1, "Scale tensor")
        check_min_dims(bias, 1, "Bias tensor")
        check_shapes_match_if_set(scale, bias, "Scale tensor", "Bias tensor")

    def infer_properties_node(self) -> None:
        """Fill data types; Y takes X's dims and strides (packed without X's); SCALE and BIAS
        without dims take X's with 1 at index 0, without strides X's layout; outside the
        ``INFERENCE`` phase, MEAN and INV_VARIANCE without dims take X's with 1 where SCALE is
        not 1 (X's batch dim and 1s when SCALE's rank differs), without strides X's layout.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X or Y.
        """
        a = self.attributes
        x, y = required(a, _LABEL, ("x", "y"), SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        if not y.dim:
            y.dim = list(x.dim)
        if not y.stride:
            y.stride = list(x.stride) if x.stride else generate_strides(y.dim)
        scale = a.get_scale()
        for affine in (scale, a.get_bias()):
            if affine is None or not x.dim:
                continue
            if not affine.dim:
                affine.dim = [1, *x.dim[1:]]
            if not affine.stride:
                affine.stride = like_strides(affine.dim, x.stride)
        if a.forward_phase == NormFwdPhase.INFERENCE:
            return
        for stats in (a.get_mean(), a.get_inv_variance()):
            if stats is None:
                continue
            if not stats.dim and scale is not None and scale.dim and x.dim:
                if len(scale.dim) == len(x.dim):
                    stats.dim = [d if s == 1 else 1 for d, s in zip(x.dim, scale.dim, strict=True)]
                else:
                    stats.dim = [x.dim[0]] + [1] * (len(x.dim) - 1)
            if not stats.stride:
                stats.stride = like_strides(stats.dim, x.stride)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """The base checks, then the project's rules after hipDNN's: a constant EPSILON is a
        finite, non-negative float32 number; ``normalized_dim_count`` is between 1 and X's
        rank, or 0 with a count inferred from SCALE in that range (the engines normalize over
        X's last ``normalized_dim_count`` dims).

        Raises:
            HipdnnError: as :meth:`Node.post_validate_node`; ``INVALID_VALUE`` for the
                epsilon or the count.
        """
        super().post_validate_node(memo)
        a = self.attributes
        check_epsilon_value(a.get_epsilon(), _LABEL)
        x, scale = a.get_x(), a.get_scale()
        assert x is not None and scale is not None  # pre-validation checked them
        check_normalized_dim_count("LayerNormNode", a.normalized_dim_count, x.dim, scale.dim)


class LayernormAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the layer-norm operation descriptor
    (``HipdnnBackendAttributeName.h``, 2700-2709)."""

    OPERATION_LAYERNORM_X_EXT = 2700
    OPERATION_LAYERNORM_SCALE_EXT = 2701
    OPERATION_LAYERNORM_BIAS_EXT = 2702
    OPERATION_LAYERNORM_EPSILON_EXT = 2703
    OPERATION_LAYERNORM_Y_EXT = 2704
    OPERATION_LAYERNORM_MEAN_EXT = 2705
    OPERATION_LAYERNORM_INV_VARIANCE_EXT = 2706
    OPERATION_LAYERNORM_FWD_PHASE_EXT = 2707
    LAYERNORM_COMP_TYPE_EXT = 2708
    OPERATION_LAYERNORM_NORMALIZED_DIM_COUNT_EXT = 2709


_A = LayernormAttributeName
_In, _Out = LayernormAttributes.InputNames, LayernormAttributes.OutputNames

#: ``NormFwdPhase`` as hipDNN's layer-norm JSON writes it: the number itself (the upper-case
#: names of hipDNN's benchmark graphs, ``"TRAINING"``, read too).
NORM_FWD_PHASE_NUMBER = WireEnum(
    "NormFwdPhase",
    NormFwdPhase,
    {m.value: m.value for m in NormFwdPhase},
    aliases={m.name: m.value for m in NormFwdPhase},
)


#: Where every slot and member of a layer-norm forward node lives on each wire (hipDNN's 9-field
#: ``LayernormAttributes`` table; its JSON writes ``normalized_dim_count`` and ``forward_phase``,
#: as a number, on the node object itself, absent statistics as ``null``).
LAYERNORM_SPEC = declare_spec(
    LayerNormNode,
    table="LayernormAttributes",
    union_tag=11,
    descriptor_type=DescriptorType.OPERATION_LAYERNORM_DESCRIPTOR_EXT,
    descriptor_class="LayernormOperationDescriptor",
    compute_type=_A.LAYERNORM_COMP_TYPE_EXT,
    scalar_group=JSON_SCALARS_ON_NODE,
    nested_json_group="attributes",
    slots=(
        SlotSpec.named(_In.X, False, True, 0, _A.OPERATION_LAYERNORM_X_EXT),
        SlotSpec.named(_In.SCALE, False, True, 1, _A.OPERATION_LAYERNORM_SCALE_EXT),
        SlotSpec.named(_In.BIAS, False, True, 2, _A.OPERATION_LAYERNORM_BIAS_EXT),
        SlotSpec.named(
            _In.EPSILON,
            False,
            True,
            3,
            _A.OPERATION_LAYERNORM_EPSILON_EXT,
            pass_by_value=True,
        ),
        SlotSpec.named(_Out.Y, True, True, 4, _A.OPERATION_LAYERNORM_Y_EXT),
        SlotSpec.named(_Out.MEAN, True, False, 6, _A.OPERATION_LAYERNORM_MEAN_EXT),
        SlotSpec.named(_Out.INV_VARIANCE, True, False, 7, _A.OPERATION_LAYERNORM_INV_VARIANCE_EXT),
    ),
    scalars=(
        ScalarSpec(
            "normalized_dim_count",
            Kind.I64,
            5,
            (_A.OPERATION_LAYERNORM_NORMALIZED_DIM_COUNT_EXT, T.INT64),
            always=True,
        ),
        ScalarSpec(
            "forward_phase",
            Kind.ENUM,
            8,
            (_A.OPERATION_LAYERNORM_FWD_PHASE_EXT, T.NORM_FWD_PHASE),
            always=True,
            enum=NORM_FWD_PHASE_NUMBER,
            json_presence="read_optional",
        ),
    ),
    field_count=9,
)
