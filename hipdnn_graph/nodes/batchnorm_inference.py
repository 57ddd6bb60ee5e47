"""The batch-norm inference node: rules, inference and wire declaration (hipDNN's
``BatchnormInferenceNode``).

hipDNN's rules (``hipdnn_frontend/node/BatchnormInferenceNode.hpp``), in its order; the shape
checks shared with the other norms are in :mod:`.norm_rules`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar, TypeVar

from ..attributes.base import NodeAttributes
from ..attributes.batchnorm_inference import BatchnormInferenceAttributes
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import SlotSpec
from ..types import NodeType
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .norm_rules import check_channel_only_shape, check_shapes_match_if_set
from .rules import SETTING_PROPERTIES, check_dims_and_strides, check_min_dims, required, take_shape

__all__ = [
    "BATCHNORM_INFERENCE_SPEC",
    "BatchnormInferenceAttributeName",
    "BatchnormInferenceBase",
    "BatchnormInferenceNode",
]

S = TypeVar("S", bound=NodeAttributes)


class BatchnormInferenceBase(Node[S]):
    """hipDNN's rules of its two batch-norm inference nodes (from the inverse variance, and
    from the variance and epsilon), which differ only in their statistics' slots and one
    check."""

    #: the statistics' slots, with the names hipDNN's messages give them, in its order
    statistics: ClassVar[tuple[tuple[str, str], ...]]
    #: the slots set after the statistics (EPSILON for the variance node)
    scalars: ClassVar[tuple[str, ...]] = ()
    #: whether X's dims and strides must be set and positive (the inverse-variance node's rule)
    checks_x_layout: ClassVar[bool] = False

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, SCALE, BIAS, Y, the statistics and the scalars set;
        X, SCALE, BIAS and the statistics of rank >= 2; (:attr:`checks_x_layout`) X's dims and
        strides set and positive; Y (with dims) X's shape; SCALE, BIAS and the statistics
        ``[1, C, 1, ...]``. (No batch-size rule: the statistics are given.)

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor; ``INVALID_VALUE`` for the
                shapes.
        """
        label, a = self.spec.label, self.attributes
        slots = ("x", "scale", "bias", "y", *(slot for slot, _ in self.statistics))
        x, scale, bias, y, *stats = required(a, label, (*slots, *self.scalars))[: len(slots)]
        per_channel = [(scale, "Scale tensor"), (bias, "Bias tensor")]
        per_channel += [(t, name) for t, (_, name) in zip(stats, self.statistics, strict=True)]
        check_min_dims(x, 2, "Input tensor (x)")
        for tensor, name in per_channel:
            check_min_dims(tensor, 2, name)
        if self.checks_x_layout:
            check_dims_and_strides(x, "Input tensor (x)", label)
        check_shapes_match_if_set(x, y, "Input tensor (x)", "Output tensor (y)")
        for tensor, name in per_channel:
            check_channel_only_shape(tensor, x.dim[1], name)

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims or strides takes X's.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X or Y.
        """
        a = self.attributes
        x, y = required(a, self.spec.label, ("x", "y"), SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        take_shape(y, x)


class BatchnormInferenceNode(BatchnormInferenceBase[BatchnormInferenceAttributes]):
    """Normalizes each channel of X with saved statistics, then scales and shifts.

    Example:
        >>> import hipdnn_graph as hg
        >>> c = lambda: hg.TensorAttributes(dim=[1, 3, 1, 1], stride=[3, 1, 3, 3])
        >>> a = (hg.BatchnormInferenceAttributes()
        ...      .set_x(hg.TensorAttributes(dim=[1, 3, 4, 4], stride=[48, 1, 12, 3]))
        ...      .set_mean(c()).set_inv_variance(c()).set_scale(c()).set_bias(c())
        ...      .set_y(hg.TensorAttributes()))
        >>> node = hg.BatchnormInferenceNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_y().get_dim(), a.get_y().get_stride()
        ([1, 3, 4, 4], [48, 1, 12, 3])
    """

    node_type: ClassVar[NodeType] = NodeType.BATCHNORM_INFERENCE
    statistics = (("mean", "Mean tensor"), ("inv_variance", "Inverse variance tensor"))
    checks_x_layout = True


class BatchnormInferenceAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the batch-norm inference operation descriptor
    (``HipdnnBackendAttributeName.h``, 1800-1806)."""

    OPERATION_BATCHNORM_INFERENCE_X_EXT = 1800
    OPERATION_BATCHNORM_INFERENCE_MEAN_EXT = 1801
    OPERATION_BATCHNORM_INFERENCE_INV_VARIANCE_EXT = 1802
    OPERATION_BATCHNORM_INFERENCE_SCALE_EXT = 1803
    OPERATION_BATCHNORM_INFERENCE_BIAS_EXT = 1804
    OPERATION_BATCHNORM_INFERENCE_Y_EXT = 1805
    BATCHNORM_INF_COMP_TYPE_EXT = 1806


_A = BatchnormInferenceAttributeName
_In, _Out = BatchnormInferenceAttributes.InputNames, BatchnormInferenceAttributes.OutputNames


#: Where every slot of a batch-norm inference node lives on each wire (hipDNN's 6-field
#: ``BatchnormInferenceAttributes`` table, every uid required; JSON uids in ``inputs``/``outputs``).
BATCHNORM_INFERENCE_SPEC = declare_spec(
    BatchnormInferenceNode,
    table="BatchnormInferenceAttributes",
    union_tag=1,
    descriptor_type=DescriptorType.OPERATION_BATCHNORM_INFERENCE_DESCRIPTOR_EXT,
    descriptor_class="BatchnormInferenceOperationDescriptor",
    compute_type=_A.BATCHNORM_INF_COMP_TYPE_EXT,
    scalar_group="",
    slots=(
        SlotSpec.named(_In.X, False, True, 0, _A.OPERATION_BATCHNORM_INFERENCE_X_EXT),
        SlotSpec.named(_In.MEAN, False, True, 1, _A.OPERATION_BATCHNORM_INFERENCE_MEAN_EXT),
        SlotSpec.named(
            _In.INV_VARIANCE, False, True, 2, _A.OPERATION_BATCHNORM_INFERENCE_INV_VARIANCE_EXT
        ),
        SlotSpec.named(_In.SCALE, False, True, 3, _A.OPERATION_BATCHNORM_INFERENCE_SCALE_EXT),
        SlotSpec.named(_In.BIAS, False, True, 4, _A.OPERATION_BATCHNORM_INFERENCE_BIAS_EXT),
        SlotSpec.named(_Out.Y, True, True, 5, _A.OPERATION_BATCHNORM_INFERENCE_Y_EXT),
    ),
    field_count=6,
)
