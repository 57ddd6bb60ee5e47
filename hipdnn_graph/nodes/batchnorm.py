"""The batch-norm training forward node: rules, inference and wire declaration (hipDNN's
``BatchnormNode``).

hipDNN's rules (``hipdnn_frontend/node/BatchnormNode.hpp``), in its order; the shape checks
shared with the other norms are in :mod:`.norm_rules`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.batchnorm import BatchnormAttributes
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import Kind, SlotSpec, UnmodelledSpec
from ..types import NodeType
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .norm_rules import (
    check_bn_training_spatial,
    check_channel_only_shape,
    check_channel_only_shape_if_set,
    check_epsilon_value,
    check_scalar_parameter,
    check_shapes_match_if_set,
    infer_channel_tensor,
    refuse_peer_stats,
)
from .rules import (
    SETTING_PROPERTIES,
    check_dims_and_strides,
    check_min_dims,
    invalid,
    missing,
    required,
    take_shape,
)

__all__ = ["BATCHNORM_SPEC", "BatchnormAttributeName", "BatchnormNode"]

_LABEL = "BatchnormNode"


class BatchnormNode(Node[BatchnormAttributes]):
    """Normalizes each channel of X by its batch statistics, then scales and shifts; optionally
    updates running statistics.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.BatchnormAttributes()
        ...      .set_x(hg.TensorAttributes(dim=[2, 3, 4, 4], stride=[48, 16, 4, 1]))
        ...      .set_scale(hg.TensorAttributes(dim=[1, 3, 1, 1], stride=[3, 1, 1, 1]))
        ...      .set_bias(hg.TensorAttributes(dim=[1, 3, 1, 1], stride=[3, 1, 1, 1]))
        ...      .set_epsilon(hg.TensorAttributes().set_value(1e-5))
        ...      .set_y(hg.TensorAttributes()).set_mean(hg.TensorAttributes()))
        >>> node = hg.BatchnormNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_y().get_dim(), a.get_mean().get_dim(), a.get_mean().get_stride()
        ([2, 3, 4, 4], [1, 3, 1, 1], [3, 1, 3, 3])
    """

    node_type: ClassVar[NodeType] = NodeType.BATCHNORM

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, SCALE, BIAS, Y, EPSILON set; X, SCALE, BIAS of rank >= 2;
        EPSILON a pass-by-value scalar; X's dims and strides set and positive; Y (with dims) X's
        shape; SCALE, BIAS (and MEAN, INV_VARIANCE with dims) ``[1, C, 1, ...]``; the running
        statistics all four or none, each (with dims) ``[1, C, 1, ...]``; more than one value per
        channel. Then (this project's own check) no peer statistics.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or epsilon dims;
                ``INVALID_VALUE`` for the shapes; ``GRAPH_NOT_SUPPORTED`` for peer statistics.
        """
        a = self.attributes
        x, scale, bias, y, epsilon = required(a, _LABEL, ("x", "scale", "bias", "y", "epsilon"))
        for tensor, name in (
            (x, "Input tensor (x)"),
            (scale, "Scale tensor"),
            (bias, "Bias tensor"),
        ):
            check_min_dims(tensor, 2, name)
        check_scalar_parameter(epsilon, "Epsilon")
        check_dims_and_strides(x, "Input tensor (x)", _LABEL)
        check_shapes_match_if_set(x, y, "Input tensor (x)", "Output tensor (y)")
        channels = x.dim[1]
        check_channel_only_shape(scale, channels, "Scale tensor")
        check_channel_only_shape(bias, channels, "Bias tensor")
        check_channel_only_shape_if_set(a.get_mean(), channels, "Mean tensor")
        check_channel_only_shape_if_set(a.get_inv_variance(), channels, "Inverse variance tensor")
        running = (
            (a.get_prev_running_mean(), "Previous running mean tensor"),
            (a.get_prev_running_variance(), "Previous running variance tensor"),
            (a.get_next_running_mean(), "Next running mean tensor"),
            (a.get_next_running_variance(), "Next running variance tensor"),
        )
        present = [t is not None for t, _ in running]
        if any(present):
            if not all(present):
                raise invalid(
                    f"{_LABEL}: If any running statistics are provided, all running "
                    "statistics (prev_running_mean, prev_running_variance, next_running_mean, "
                    "next_running_variance) must be provided",
                )
            for stat, name in running:
                check_channel_only_shape_if_set(stat, channels, name)
        check_bn_training_spatial(x, scale, "Batch normalization training")
        refuse_peer_stats(a, _LABEL)

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims or strides takes X's; MEAN and INV_VARIANCE (and the
        next running statistics, when all four running tensors are set) without dims take
        ``[1, C, 1, ...]``, without strides channels-last packed strides.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X or Y.
        """
        a = self.attributes
        x, y = required(a, _LABEL, ("x", "y"), SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        take_shape(y, x)
        for stats in (a.get_mean(), a.get_inv_variance()):
            if stats is not None:
                infer_channel_tensor(stats, x)
        nxt_mean, nxt_var = a.get_next_running_mean(), a.get_next_running_variance()
        prev = (a.get_prev_running_mean(), a.get_prev_running_variance())
        if nxt_mean is not None and nxt_var is not None and None not in prev:
            infer_channel_tensor(nxt_mean, x)
            infer_channel_tensor(nxt_var, x)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """The base checks, then the project's rules after hipDNN's: a constant EPSILON is a
        finite, non-negative float32 number; the running statistics come with a MOMENTUM (the
        update ``(1 - m) * prev + m * batch`` reads it).

        Raises:
            HipdnnError: as :meth:`Node.post_validate_node`; ``INVALID_VALUE`` for the
                epsilon; ``ATTRIBUTE_NOT_SET`` for running statistics without MOMENTUM.
        """
        super().post_validate_node(memo)
        a = self.attributes
        check_epsilon_value(a.get_epsilon(), _LABEL)
        if a.get_prev_running_mean() is not None and a.get_momentum() is None:
            raise missing(
                f"{_LABEL}: the running statistics need a momentum tensor "
                "(momentum_tensor_uid); none is set"
            )


class BatchnormAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the batch-norm training forward operation descriptor
    (``HipdnnBackendAttributeName.h``, 2900-2913)."""

    OPERATION_BATCHNORM_X_EXT = 2900
    OPERATION_BATCHNORM_SCALE_EXT = 2901
    OPERATION_BATCHNORM_BIAS_EXT = 2902
    OPERATION_BATCHNORM_EPSILON_EXT = 2903
    OPERATION_BATCHNORM_Y_EXT = 2904
    OPERATION_BATCHNORM_PREV_RUNNING_MEAN_EXT = 2905
    OPERATION_BATCHNORM_PREV_RUNNING_VARIANCE_EXT = 2906
    OPERATION_BATCHNORM_MOMENTUM_EXT = 2907
    OPERATION_BATCHNORM_MEAN_EXT = 2908
    OPERATION_BATCHNORM_INV_VARIANCE_EXT = 2909
    OPERATION_BATCHNORM_NEXT_RUNNING_MEAN_EXT = 2910
    OPERATION_BATCHNORM_NEXT_RUNNING_VARIANCE_EXT = 2911
    BATCHNORM_COMP_TYPE_EXT = 2912
    OPERATION_BATCHNORM_PEER_STATS_EXT = 2913


_A = BatchnormAttributeName
_In, _Out = BatchnormAttributes.InputNames, BatchnormAttributes.OutputNames


#: Where every slot of a batch-norm training forward node lives on each wire (hipDNN's 13-field
#: ``BatchnormAttributes`` table; its JSON keeps the uids in ``inputs``/``outputs``, absent
#: optional tensors as ``null``, ``peer_stats_tensor_uid`` an array among the inputs).
BATCHNORM_SPEC = declare_spec(
    BatchnormNode,
    table="BatchnormAttributes",
    union_tag=4,
    descriptor_type=DescriptorType.OPERATION_BATCHNORM_DESCRIPTOR_EXT,
    descriptor_class="BatchnormOperationDescriptor",
    compute_type=_A.BATCHNORM_COMP_TYPE_EXT,
    scalar_group="",
    slots=(
        SlotSpec.named(_In.X, False, True, 0, _A.OPERATION_BATCHNORM_X_EXT),
        SlotSpec.named(_In.SCALE, False, True, 1, _A.OPERATION_BATCHNORM_SCALE_EXT),
        SlotSpec.named(_In.BIAS, False, True, 2, _A.OPERATION_BATCHNORM_BIAS_EXT),
        SlotSpec.named(
            _In.PREV_RUNNING_MEAN, False, False, 5, _A.OPERATION_BATCHNORM_PREV_RUNNING_MEAN_EXT
        ),
        SlotSpec.named(
            _In.PREV_RUNNING_VARIANCE,
            False,
            False,
            6,
            _A.OPERATION_BATCHNORM_PREV_RUNNING_VARIANCE_EXT,
        ),
        SlotSpec.named(
            _In.MOMENTUM,
            False,
            False,
            7,
            _A.OPERATION_BATCHNORM_MOMENTUM_EXT,
            pass_by_value=True,
        ),
        SlotSpec.named(
            _In.EPSILON,
            False,
            True,
            3,
            _A.OPERATION_BATCHNORM_EPSILON_EXT,
            pass_by_value=True,
        ),
        SlotSpec.named(_Out.Y, True, True, 8, _A.OPERATION_BATCHNORM_Y_EXT),
        SlotSpec.named(_Out.MEAN, True, False, 9, _A.OPERATION_BATCHNORM_MEAN_EXT),
        SlotSpec.named(_Out.INV_VARIANCE, True, False, 10, _A.OPERATION_BATCHNORM_INV_VARIANCE_EXT),
        SlotSpec.named(
            _Out.NEXT_RUNNING_MEAN,
            True,
            False,
            11,
            _A.OPERATION_BATCHNORM_NEXT_RUNNING_MEAN_EXT,
        ),
        SlotSpec.named(
            _Out.NEXT_RUNNING_VARIANCE,
            True,
            False,
            12,
            _A.OPERATION_BATCHNORM_NEXT_RUNNING_VARIANCE_EXT,
        ),
    ),
    unmodelled=(
        UnmodelledSpec(
            "peer_stats_tensor_uid",
            Kind.I64_VEC,
            4,
            "inputs",
            (_A.OPERATION_BATCHNORM_PEER_STATS_EXT, T.BACKEND_DESCRIPTOR),
        ),
    ),
    field_count=13,
)
