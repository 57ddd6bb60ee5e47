"""The batch-norm backward node: rules, inference and wire declaration (hipDNN's
``BatchnormBackwardNode``).

hipDNN's rules (``hipdnn_frontend/node/BatchnormBackwardNode.hpp``), in its order; the shape
checks shared with the other norms are in :mod:`.norm_rules`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.batchnorm_backward import BatchnormBackwardAttributes
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
    check_shapes_match_if_set,
    infer_channel_tensor,
    refuse_peer_stats,
)
from .rules import (
    SETTING_PROPERTIES,
    check_dims_and_strides,
    check_min_dims,
    invalid,
    required,
    take_shape,
)

__all__ = ["BATCHNORM_BACKWARD_SPEC", "BatchnormBackwardAttributeName", "BatchnormBackwardNode"]

_LABEL = "BatchnormBackwardNode"


class BatchnormBackwardNode(Node[BatchnormBackwardAttributes]):
    """The gradients of a batch norm: DX, and per channel DSCALE and DBIAS.

    Example:
        >>> import hipdnn_graph as hg
        >>> x = lambda: hg.TensorAttributes(dim=[2, 3, 4, 4], stride=[48, 16, 4, 1])
        >>> a = (hg.BatchnormBackwardAttributes().set_dy(x()).set_x(x())
        ...      .set_scale(hg.TensorAttributes(dim=[1, 3, 1, 1]))
        ...      .set_dx(hg.TensorAttributes()).set_dscale(hg.TensorAttributes())
        ...      .set_dbias(hg.TensorAttributes()))
        >>> node = hg.BatchnormBackwardNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_dx().get_dim(), a.get_dscale().get_dim(), a.get_dbias().get_stride()
        ([2, 3, 4, 4], [1, 3, 1, 1], [3, 1, 3, 3])
    """

    node_type: ClassVar[NodeType] = NodeType.BATCHNORM_BACKWARD

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: DY, X, SCALE, DX, DSCALE, DBIAS set; X, DY, SCALE of rank
        >= 2; X's, then DY's dims and strides set and positive; DY X's shape; DX (with dims) X's
        shape; SCALE ``[1, C, 1, ...]``, DSCALE, DBIAS, MEAN, INV_VARIANCE (with dims) too; MEAN
        and INV_VARIANCE both or neither; more than one value per channel. Then (this project)
        no peer statistics.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor; ``INVALID_VALUE`` for the
                shapes; ``GRAPH_NOT_SUPPORTED`` for peer statistics.
        """
        a = self.attributes
        slots = ("dy", "x", "scale", "dx", "dscale", "dbias")
        dy, x, scale, dx, dscale, dbias = required(a, _LABEL, slots)
        for tensor, name in (
            (x, "Input tensor (x)"), (dy, "Gradient input tensor (dy)"), (scale, "Scale tensor")
        ):  # fmt: skip
            check_min_dims(tensor, 2, name)
        check_dims_and_strides(x, "Input tensor (x)", _LABEL)
        check_dims_and_strides(dy, "Gradient input tensor (dy)", _LABEL)
        check_shapes_match_if_set(x, dy, "Input tensor (x)", "Gradient input tensor (dy)")
        check_shapes_match_if_set(x, dx, "Input tensor (x)", "Gradient output tensor (dx)")
        mean, inv_var = a.get_mean(), a.get_inv_variance()
        channels = x.dim[1]
        check_channel_only_shape(scale, channels, "Scale tensor")
        check_channel_only_shape_if_set(dscale, channels, "Scale gradient tensor (dscale)")
        check_channel_only_shape_if_set(dbias, channels, "Bias gradient tensor (dbias)")
        check_channel_only_shape_if_set(mean, channels, "Mean tensor")
        check_channel_only_shape_if_set(inv_var, channels, "Inverse variance tensor")
        if (mean is None) != (inv_var is None):
            raise invalid(f"{_LABEL} requires both mean and inv_variance to be set, or neither")
        check_bn_training_spatial(x, scale, "Batch normalization backward")
        refuse_peer_stats(a, _LABEL)

    def infer_properties_node(self) -> None:
        """Fill data types; DX without dims or strides takes X's; DSCALE and DBIAS without dims
        ``[1, C, 1, ...]``, without strides channels-last packed strides.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` without X, DX, DSCALE or DBIAS.
        """
        a = self.attributes
        x, dx, dscale, dbias = required(
            a, _LABEL, ("x", "dx", "dscale", "dbias"), SETTING_PROPERTIES
        )
        a.fill_from_context(self.graph_attributes)
        take_shape(dx, x)
        infer_channel_tensor(dscale, x)
        infer_channel_tensor(dbias, x)


class BatchnormBackwardAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the batch-norm backward operation descriptor
    (``HipdnnBackendAttributeName.h``, 2000-2007 and 2100-2101)."""

    OPERATION_BATCHNORM_BACKWARD_DY_EXT = 2000
    OPERATION_BATCHNORM_BACKWARD_X_EXT = 2001
    OPERATION_BATCHNORM_BACKWARD_SCALE_EXT = 2002
    OPERATION_BATCHNORM_BACKWARD_DX_EXT = 2003
    OPERATION_BATCHNORM_BACKWARD_DSCALE_EXT = 2004
    OPERATION_BATCHNORM_BACKWARD_DBIAS_EXT = 2005
    OPERATION_BATCHNORM_BACKWARD_MEAN_EXT = 2006
    OPERATION_BATCHNORM_BACKWARD_INV_VARIANCE_EXT = 2007
    BATCHNORM_BACKWARD_COMP_TYPE_EXT = 2100
    OPERATION_BATCHNORM_BACKWARD_PEER_STATS_EXT = 2101


_A = BatchnormBackwardAttributeName
_In, _Out = BatchnormBackwardAttributes.InputNames, BatchnormBackwardAttributes.OutputNames


#: Where every slot of a batch-norm backward node lives on each wire (hipDNN's 9-field
#: ``BatchnormBackwardAttributes`` table; JSON uids in ``inputs``/``outputs``, absent mean and
#: inv_variance ``null``, ``peer_stats_tensor_uid`` an array among the inputs).
BATCHNORM_BACKWARD_SPEC = declare_spec(
    BatchnormBackwardNode,
    table="BatchnormBackwardAttributes",
    union_tag=3,
    descriptor_type=DescriptorType.OPERATION_BATCHNORM_BACKWARD_DESCRIPTOR_EXT,
    descriptor_class="BatchnormBackwardOperationDescriptor",
    compute_type=_A.BATCHNORM_BACKWARD_COMP_TYPE_EXT,
    scalar_group="",
    slots=(
        SlotSpec.named(_In.DY, False, True, 0, _A.OPERATION_BATCHNORM_BACKWARD_DY_EXT),
        SlotSpec.named(_In.X, False, True, 1, _A.OPERATION_BATCHNORM_BACKWARD_X_EXT),
        SlotSpec.named(_In.SCALE, False, True, 4, _A.OPERATION_BATCHNORM_BACKWARD_SCALE_EXT),
        SlotSpec.named(_In.MEAN, False, False, 2, _A.OPERATION_BATCHNORM_BACKWARD_MEAN_EXT),
        SlotSpec.named(
            _In.INV_VARIANCE, False, False, 3, _A.OPERATION_BATCHNORM_BACKWARD_INV_VARIANCE_EXT
        ),
        SlotSpec.named(_Out.DX, True, True, 6, _A.OPERATION_BATCHNORM_BACKWARD_DX_EXT),
        SlotSpec.named(_Out.DSCALE, True, True, 7, _A.OPERATION_BATCHNORM_BACKWARD_DSCALE_EXT),
        SlotSpec.named(_Out.DBIAS, True, True, 8, _A.OPERATION_BATCHNORM_BACKWARD_DBIAS_EXT),
    ),
    unmodelled=(
        UnmodelledSpec(
            "peer_stats_tensor_uid",
            Kind.I64_VEC,
            5,
            "inputs",
            (_A.OPERATION_BATCHNORM_BACKWARD_PEER_STATS_EXT, T.BACKEND_DESCRIPTOR),
        ),
    ),
    field_count=9,
)
