"""The batch-norm inference node: rules, inference and wire declaration (hipDNN's
``BatchnormInferenceNode``).

hipDNN's rules (``hipdnn_frontend/node/BatchnormInferenceNode.hpp``), in its order; the shape
checks shared with the other norms are in :mod:`.norm_rules`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.batchnorm_inference import BatchnormInferenceAttributes
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import NodeSpec, SlotSpec, register_node_spec
from ..errors import HipdnnError
from ..types import ErrorCode, NodeType
from .base import Node
from .batchnorm import positive_dims_and_strides
from .input_memo import InputRuleMemo
from .norm_rules import check_channel_only_shape, check_min_dims, check_shapes_match_if_set

__all__ = ["BATCHNORM_INFERENCE_SPEC", "BatchnormInferenceAttributeName", "BatchnormInferenceNode"]


def _missing(message: str) -> HipdnnError:
    return HipdnnError(ErrorCode.ATTRIBUTE_NOT_SET, message)


class BatchnormInferenceNode(Node[BatchnormInferenceAttributes]):
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
    name_prefix: ClassVar[str] = "BatchnormInference"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X, SCALE, BIAS, Y, MEAN, INV_VARIANCE set; X, SCALE, BIAS,
        MEAN, INV_VARIANCE of rank >= 2; X's dims and strides set and positive; Y (with dims)
        X's shape; SCALE, BIAS, MEAN, INV_VARIANCE ``[1, C, 1, ...]``. (No batch-size rule: the
        statistics are given.)

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor; ``INVALID_VALUE`` for the
                shapes.
        """
        a = self.attributes
        x, scale, bias, y = a.get_x(), a.get_scale(), a.get_bias(), a.get_y()
        mean, inv_var = a.get_mean(), a.get_inv_variance()
        for tensor, name in (
            (x, "x"), (scale, "scale"), (bias, "bias"), (y, "y"), (mean, "mean"),
            (inv_var, "inv_variance"),
        ):  # fmt: skip
            if tensor is None:
                raise _missing(f"BatchnormInferenceNode missing {name} for pre-validation")
        assert x is not None and scale is not None and bias is not None
        assert mean is not None and inv_var is not None
        check_min_dims(x, 2, "Input tensor (x)")
        check_min_dims(scale, 2, "Scale tensor")
        check_min_dims(bias, 2, "Bias tensor")
        check_min_dims(mean, 2, "Mean tensor")
        check_min_dims(inv_var, 2, "Inverse variance tensor")
        if not positive_dims_and_strides(x):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                "BatchnormInferenceNode: Input tensor (x) dimensions and strides must be set and "
                "positive",
            )
        check_shapes_match_if_set(x, y, "Input tensor (x)", "Output tensor (y)")
        channels = x.dim[1]
        check_channel_only_shape(scale, channels, "Scale tensor")
        check_channel_only_shape(bias, channels, "Bias tensor")
        check_channel_only_shape(mean, channels, "Mean tensor")
        check_channel_only_shape(inv_var, channels, "Inverse variance tensor")

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims or strides takes X's.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X or Y.
        """
        a = self.attributes
        x, y = a.get_x(), a.get_y()
        if x is None:
            raise _missing("BatchnormInferenceNode missing x for setting properties")
        if y is None:
            raise _missing("BatchnormInferenceNode missing y for setting properties")
        a.fill_from_context(self.graph_attributes)
        if not y.dim:
            y.dim = list(x.dim)
        if not y.stride:
            y.stride = list(x.stride)


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
BATCHNORM_INFERENCE_SPEC = register_node_spec(
    NodeSpec(
        table="BatchnormInferenceAttributes",
        union_tag=1,
        label="BatchnormInferenceNode",
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
        scalars=(),
        unmodelled=(),
        field_count=6,
        attributes_cls=BatchnormInferenceAttributes,
        make_node=BatchnormInferenceNode,
    )
)
BatchnormInferenceNode.spec = BATCHNORM_INFERENCE_SPEC
