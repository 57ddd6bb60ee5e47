"""The resample forward node (pooling): rules, inference and wire declaration (hipDNN's
``ResampleFwdNode``).

hipDNN's rules (``hipdnn_frontend/node/ResampleFwdNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from typing import ClassVar

from ..attributes.resample import ResampleFwdAttributes
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    JSON_ON_NODE,
    Kind,
    ScalarSpec,
    SlotSpec,
)
from ..types import NodeType, ResampleMode
from .base import declare_spec
from .conv_rules import c_div
from .input_memo import InputRuleMemo
from .norm_rules import ordered_strides, stride_order, stride_order_nhwc
from .resample_rules import INDEX_TYPES, ResampleNode, spatial_members
from .resample_spec import ResampleAttributeName, resample_scalars
from .rules import SETTING_PROPERTIES, invalid, missing, required

__all__ = ["RESAMPLE_FWD_SPEC", "ResampleFwdNode"]

_LABEL = "ResampleFwdNode"


class ResampleFwdNode(ResampleNode[ResampleFwdAttributes]):
    """Pools ``X [N, C, spatial...]`` into ``Y [N, C, out...]`` with
    ``out = (in + pre + post - window) / stride + 1`` (and, for ``MAXPOOL`` with
    ``generate_index``, the INDEX of each maximum).

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.ResampleFwdAttributes().set_x(hg.TensorAttributes(dim=[1, 3, 32, 32]))
        ...      .set_y(hg.TensorAttributes()).set_pre_padding([1, 1]).set_post_padding([1, 1])
        ...      .set_stride([2, 2]).set_window([3, 3]))
        >>> node = hg.ResampleFwdNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_y().get_dim(), a.get_y().get_stride()
        ([1, 3, 16, 16], [768, 1, 48, 3])
    """

    node_type: ClassVar[NodeType] = NodeType.RESAMPLE_FWD
    padded_slot: ClassVar[str] = "X"
    result: ClassVar[str] = "Y"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: X and Y set; INDEX set when ``MAXPOOL`` generates one;
        X's and Y's rank at least 3 when they have dims; INDEX (when set) INT8 or INT32.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for something missing, ``INVALID_VALUE`` for the
                others.
        """
        a = self.attributes
        x, y, index = a.get_x(), a.get_y(), a.get_index()
        if x is None:
            raise missing(f"{_LABEL} missing input X for pre-validation")
        if y is None:
            raise missing(f"{_LABEL} missing output Y for pre-validation")
        if a.generate_index and a.resample_mode == ResampleMode.MAXPOOL and index is None:
            raise missing(f"{_LABEL} missing output Index when index generation requested")
        if x.dim and len(x.dim) < 3:
            raise invalid(f"{_LABEL} input X must have at least rank 3 (N, C, spatial...)")
        if y.dim and len(y.dim) < 3:
            raise invalid(f"{_LABEL} output Y must have at least rank 3 (N, C, spatial...)")
        if index is not None and index.data_type not in INDEX_TYPES:
            raise invalid(f"{_LABEL} output Index type must be Int8 or Int32")

    def infer_properties_node(self) -> None:
        """Fill data types; Y without dims gets ``[N, C, out...]``; Y without strides X's
        memory order (channels-last when X has no strides); INDEX without dims or strides
        Y's.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing X or Y; ``INVALID_VALUE`` where
                hipDNN would read past X's dims or the members, or divide by a zero stride.
        """
        a = self.attributes
        x, y = required(a, _LABEL, ("x", "y"), SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        if not y.dim:
            xd = x.dim
            if len(xd) < 3:
                raise invalid(f"{_LABEL} input X must have at least rank 3 (N, C, spatial...)")
            spatial_members(a, len(xd) - 2, _LABEL, "Y")
            dims = [xd[0], xd[1]]
            for i in range(len(xd) - 2):
                numerator = xd[i + 2] + a.pre_padding[i] + a.post_padding[i] - a.window[i]
                dims.append(c_div(numerator, a.stride[i]) + 1)
            y.dim = dims
        if not y.stride:
            if x.stride:
                if len(x.stride) != len(y.dim):
                    raise invalid(
                        f"{_LABEL}: X strides and Y dimensions differ in rank; cannot infer Y "
                        "strides"
                    )
                y.stride = ordered_strides(y.dim, stride_order(x.stride))
            else:
                y.stride = ordered_strides(y.dim, stride_order_nhwc(len(y.dim)))
        self.infer_index(y)


_A = ResampleAttributeName
_In, _Out = ResampleFwdAttributes.InputNames, ResampleFwdAttributes.OutputNames

#: Where every slot and member of a resample forward node lives on each wire (hipDNN's 10-field
#: ``ResampleFwdAttributes`` table; its JSON writes the uids and members on the node object
#: itself and leaves ``index_tensor_uid`` out when there is no INDEX). ``generate_index`` is
#: written, in the bytes and the JSON, whenever it is set, ``False`` included, and left out when
#: unset: hipDNN's schemas declare it ``bool = false`` (ROCm/rocm-libraries) or ``bool = null``
#: (its newer forks), and an absent field reads as false under the first but as unset under the
#: second, while a written one reads the same under both.
RESAMPLE_FWD_SPEC = declare_spec(
    ResampleFwdNode,
    table="ResampleFwdAttributes",
    union_tag=19,
    descriptor_type=DescriptorType.OPERATION_RESAMPLE_FWD,
    descriptor_class="ResampleFwdOperationDescriptor",
    compute_type=_A.RESAMPLE_COMP_TYPE,
    scalar_group=JSON_ON_NODE,
    nested_json_group="attributes",
    omit_absent_uids=True,
    slots=(
        SlotSpec(_In.X, False, True, 0, _A.OPERATION_RESAMPLE_FWD_XDESC, "x_tensor_uid"),
        SlotSpec(_Out.Y, True, True, 1, _A.OPERATION_RESAMPLE_FWD_YDESC, "y_tensor_uid"),
        SlotSpec(_Out.INDEX, True, False, 2, _A.OPERATION_RESAMPLE_FWD_IDXDESC, "index_tensor_uid"),
    ),
    scalars=(
        *resample_scalars(),
        ScalarSpec(
            "generate_index",
            Kind.BOOL_OPT,
            9,
            (_A.RESAMPLE_GENERATE_INDEX_EXT, T.BOOLEAN),
            json_presence="when_set",
        ),
    ),
    field_count=10,
)
