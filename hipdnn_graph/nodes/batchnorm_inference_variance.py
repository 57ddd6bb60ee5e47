"""The batch-norm inference node taking the variance and epsilon: rules, inference and wire
declaration (hipDNN's ``BatchnormInferenceNodeVarianceExt``).

hipDNN's rules (``hipdnn_frontend/node/BatchnormInferenceNodeVarianceExt.hpp``), in its order;
the shape checks shared with the other norms are in :mod:`.norm_rules`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.batchnorm_inference_variance import BatchnormInferenceAttributesVarianceExt
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import SlotSpec
from ..types import NodeType
from .base import declare_spec
from .batchnorm_inference import BatchnormInferenceBase
from .input_memo import InputRuleMemo
from .norm_rules import check_epsilon_value

__all__ = [
    "BATCHNORM_INFERENCE_VARIANCE_SPEC",
    "BatchnormInferenceVarianceAttributeName",
    "BatchnormInferenceVarianceNode",
]

_LABEL = "BatchnormInferenceNodeVarianceExt"


class BatchnormInferenceVarianceNode(
    BatchnormInferenceBase[BatchnormInferenceAttributesVarianceExt]
):
    """Normalizes each channel of X with a saved mean and variance, then scales and shifts
    (hipDNN's ``BatchnormInferenceNodeVarianceExt``).

    Example:
        >>> import hipdnn_graph as hg
        >>> c = lambda: hg.TensorAttributes(dim=[1, 3, 1, 1])
        >>> a = (hg.BatchnormInferenceAttributesVarianceExt()
        ...      .set_x(hg.TensorAttributes(dim=[2, 3, 4, 4], stride=[48, 16, 4, 1]))
        ...      .set_mean(c()).set_variance(c()).set_scale(c()).set_bias(c())
        ...      .set_epsilon(hg.TensorAttributes().set_value(1e-5))
        ...      .set_y(hg.TensorAttributes()))
        >>> node = hg.BatchnormInferenceVarianceNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_y().get_dim()
        [2, 3, 4, 4]
    """

    node_type: ClassVar[NodeType] = NodeType.BATCHNORM_INFERENCE_VARIANCE_EXT
    name_prefix: ClassVar[str] = "BatchnormInferenceVarianceExt"

    statistics = (("mean", "Mean tensor"), ("variance", "Variance tensor"))
    scalars = ("epsilon",)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """The base checks, then the project's rule after hipDNN's: a constant EPSILON is a
        finite, non-negative float32 number.

        Raises:
            HipdnnError: as :meth:`Node.post_validate_node`; ``INVALID_VALUE`` for the
                epsilon.
        """
        super().post_validate_node(memo)
        check_epsilon_value(self.attributes.get_epsilon(), _LABEL)


class BatchnormInferenceVarianceAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the batch-norm inference-with-variance operation
    descriptor (``HipdnnBackendAttributeName.h``, 1900-1907)."""

    OPERATION_BATCHNORM_INFERENCE_VARIANCE_X_EXT = 1900
    OPERATION_BATCHNORM_INFERENCE_VARIANCE_MEAN_EXT = 1901
    OPERATION_BATCHNORM_INFERENCE_VARIANCE_VARIANCE_EXT = 1902
    OPERATION_BATCHNORM_INFERENCE_VARIANCE_SCALE_EXT = 1903
    OPERATION_BATCHNORM_INFERENCE_VARIANCE_BIAS_EXT = 1904
    OPERATION_BATCHNORM_INFERENCE_VARIANCE_Y_EXT = 1905
    OPERATION_BATCHNORM_INFERENCE_VARIANCE_EPSILON_EXT = 1906
    BATCHNORM_INF_VAR_COMP_TYPE_EXT = 1907


_A = BatchnormInferenceVarianceAttributeName
_In = BatchnormInferenceAttributesVarianceExt.InputNames
_Out = BatchnormInferenceAttributesVarianceExt.OutputNames


#: Where every slot lives on each wire (hipDNN's 7-field
#: ``BatchnormInferenceAttributesVarianceExt`` table, every uid required; JSON uids in
#: ``inputs``/``outputs``).
BATCHNORM_INFERENCE_VARIANCE_SPEC = declare_spec(
    BatchnormInferenceVarianceNode,
    table="BatchnormInferenceAttributesVarianceExt",
    union_tag=8,
    label=_LABEL,
    descriptor_type=DescriptorType.OPERATION_BATCHNORM_INFERENCE_VARIANCE_DESCRIPTOR_EXT,
    descriptor_class="BatchnormInferenceVarianceExtOperationDescriptor",
    compute_type=_A.BATCHNORM_INF_VAR_COMP_TYPE_EXT,
    scalar_group="",
    slots=(
        SlotSpec.named(_In.X, False, True, 0, _A.OPERATION_BATCHNORM_INFERENCE_VARIANCE_X_EXT),
        SlotSpec.named(
            _In.MEAN, False, True, 1, _A.OPERATION_BATCHNORM_INFERENCE_VARIANCE_MEAN_EXT
        ),
        SlotSpec.named(
            _In.VARIANCE, False, True, 2, _A.OPERATION_BATCHNORM_INFERENCE_VARIANCE_VARIANCE_EXT
        ),
        SlotSpec.named(
            _In.SCALE, False, True, 3, _A.OPERATION_BATCHNORM_INFERENCE_VARIANCE_SCALE_EXT
        ),
        SlotSpec.named(
            _In.BIAS, False, True, 4, _A.OPERATION_BATCHNORM_INFERENCE_VARIANCE_BIAS_EXT
        ),
        SlotSpec.named(
            _In.EPSILON,
            False,
            True,
            6,
            _A.OPERATION_BATCHNORM_INFERENCE_VARIANCE_EPSILON_EXT,
            pass_by_value=True,
        ),
        SlotSpec.named(_Out.Y, True, True, 5, _A.OPERATION_BATCHNORM_INFERENCE_VARIANCE_Y_EXT),
    ),
    field_count=7,
)
