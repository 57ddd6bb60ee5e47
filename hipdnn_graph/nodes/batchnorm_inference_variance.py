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
from ..descriptors.node_spec import NodeSpec, SlotSpec, register_node_spec
from ..errors import HipdnnError
from ..types import ErrorCode, NodeType
from .base import Node
from .input_memo import InputRuleMemo
from .norm_rules import check_channel_only_shape, check_min_dims, check_shapes_match_if_set

__all__ = [
    "BATCHNORM_INFERENCE_VARIANCE_SPEC",
    "BatchnormInferenceVarianceAttributeName",
    "BatchnormInferenceVarianceNode",
]

_LABEL = "BatchnormInferenceNodeVarianceExt"


def _missing(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.ATTRIBUTE_NOT_SET, message)


class BatchnormInferenceVarianceNode(Node[BatchnormInferenceAttributesVarianceExt]):
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

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, SCALE, BIAS, Y, MEAN, VARIANCE, EPSILON set; X, SCALE,
        BIAS, MEAN, VARIANCE of rank >= 2; Y (with dims) X's shape; SCALE, BIAS, MEAN, VARIANCE
        ``[1, C, 1, ...]``.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor; ``INVALID_VALUE`` for the
                shapes.
        """
        a = self.attributes
        x, scale, bias, y = a.get_x(), a.get_scale(), a.get_bias(), a.get_y()
        mean, variance = a.get_mean(), a.get_variance()
        for tensor, name in (
            (x, "x"), (scale, "scale"), (bias, "bias"), (y, "y"), (mean, "mean"),
            (variance, "variance"), (a.get_epsilon(), "epsilon"),
        ):  # fmt: skip
            if tensor is None:
                raise _missing(f"{_LABEL} missing {name} for pre-validation")
        assert x is not None and scale is not None and bias is not None
        assert mean is not None and variance is not None
        check_min_dims(x, 2, "Input tensor (x)")
        check_min_dims(scale, 2, "Scale tensor")
        check_min_dims(bias, 2, "Bias tensor")
        check_min_dims(mean, 2, "Mean tensor")
        check_min_dims(variance, 2, "Variance tensor")
        check_shapes_match_if_set(x, y, "Input tensor (x)", "Output tensor (y)")
        channels = x.dim[1]
        check_channel_only_shape(scale, channels, "Scale tensor")
        check_channel_only_shape(bias, channels, "Bias tensor")
        check_channel_only_shape(mean, channels, "Mean tensor")
        check_channel_only_shape(variance, channels, "Variance tensor")

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims or strides takes X's.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X or Y.
        """
        a = self.attributes
        x, y = a.get_x(), a.get_y()
        if x is None:
            raise _missing(f"{_LABEL} missing x for setting properties")
        if y is None:
            raise _missing(f"{_LABEL} missing y for setting properties")
        a.fill_from_context(self.graph_attributes)
        if not y.dim:
            y.dim = list(x.dim)
        if not y.stride:
            y.stride = list(x.stride)


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
BATCHNORM_INFERENCE_VARIANCE_SPEC = register_node_spec(
    NodeSpec(
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
        scalars=(),
        unmodelled=(),
        field_count=7,
        attributes_cls=BatchnormInferenceAttributesVarianceExt,
        make_node=BatchnormInferenceVarianceNode,
    )
)
BatchnormInferenceVarianceNode.spec = BATCHNORM_INFERENCE_VARIANCE_SPEC
