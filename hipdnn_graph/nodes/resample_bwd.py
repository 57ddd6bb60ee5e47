"""The resample backward node: rules, inference and wire declaration (hipDNN's
``ResampleBwdNode``).

hipDNN's rules (``hipdnn_frontend/node/ResampleBwdNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages. Its table rests on a
reconstructed schema (``tests/wire/schemas/resample_bwd_attributes.fbs``).
"""

from __future__ import annotations

from typing import ClassVar

from ..attributes.resample import ResampleBwdAttributes
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import JSON_ON_NODE, SlotSpec
from ..types import NodeType, ResampleMode
from .base import declare_spec
from .conv_rules import infer_strides
from .input_memo import InputRuleMemo
from .resample_rules import INDEX_TYPES, ResampleNode, spatial_members
from .resample_spec import ResampleAttributeName, resample_scalars
from .rules import SETTING_PROPERTIES, invalid, missing, required

__all__ = ["RESAMPLE_BWD_SPEC", "ResampleBwdNode"]

_LABEL = "ResampleBwdNode"
_RANK = "must have at least rank 3 (N, C, spatial...)"


class ResampleBwdNode(ResampleNode[ResampleBwdAttributes]):
    """The gradient ``DX [N, C, in...]`` of a resample forward's X from ``DY [N, C, out...]``
    (and, for ``MAXPOOL``, the forward's INDEX); ``in = (out - 1) * stride - pre - post +
    window`` when DX has no dims.

    Example:
        >>> import hipdnn_graph as hg
        >>> dy = hg.TensorAttributes(dim=[1, 3, 16, 16], stride=[768, 256, 16, 1])
        >>> a = (hg.ResampleBwdAttributes().set_dy(dy).set_dx(hg.TensorAttributes())
        ...      .set_resample_mode(hg.ResampleMode.AVGPOOL_EXCLUDE_PADDING)
        ...      .set_pre_padding([1, 1]).set_post_padding([1, 1]).set_stride([2, 2])
        ...      .set_window([3, 3]))
        >>> node = hg.ResampleBwdNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_dx().get_dim(), a.get_dx().get_stride()
        ([1, 3, 31, 31], [2883, 961, 31, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.RESAMPLE_BWD
    padded_slot: ClassVar[str] = "DX"
    result: ClassVar[str] = "DY"

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: DY set; INDEX set for ``MAXPOOL``; DX set; DY's dims set;
        the four members set; DY's, DX's and INDEX's rank at least 3 when they have dims;
        INDEX INT8 or INT32.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for something missing, ``INVALID_VALUE`` for the
                others.
        """
        a = self.attributes
        dy, dx, index = a.get_dy(), a.get_dx(), a.get_index()
        if dy is None:
            raise missing(f"{_LABEL} missing dy (input) for pre-validation")
        if a.resample_mode == ResampleMode.MAXPOOL and index is None:
            raise missing(f"{_LABEL} missing Index input for MAXPOOL pre-validation")
        if dx is None:
            raise missing(f"{_LABEL} missing dx (output) for pre-validation")
        if not dy.dim:
            raise missing(f"{_LABEL} missing dy dimensions for pre-validation")
        for name in ("pre_padding", "post_padding", "stride", "window"):
            if not getattr(a, name):
                raise missing(f"{_LABEL} missing {name} for pre-validation")
        if len(dy.dim) < 3:
            raise invalid(f"{_LABEL} input DY {_RANK}")
        if dx.dim and len(dx.dim) < 3:
            raise invalid(f"{_LABEL} output DX {_RANK}")
        if index is not None:
            if index.dim and len(index.dim) < 3:
                raise invalid(f"{_LABEL} input Index {_RANK}")
            if index.data_type not in INDEX_TYPES:
                raise invalid(f"{_LABEL} input Index type must be Int8 or Int32")

    def infer_properties_node(self) -> None:
        """Fill data types; DX without dims gets ``[N, C, in...]``; DX without strides DY's
        memory order; INDEX without dims or strides DY's.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing DY or DX, or DX strides that
                cannot be inferred (hipDNN's messages); ``INVALID_VALUE`` where hipDNN would read
                past DY's dims or the members.
        """
        a = self.attributes
        dy, dx = required(a, _LABEL, ("dy", "dx"), SETTING_PROPERTIES)
        a.fill_from_context(self.graph_attributes)
        if not dx.dim:
            dyd = dy.dim
            if len(dyd) < 2:
                raise invalid(f"{_LABEL} input DY {_RANK}")
            spatial_members(a, len(dyd) - 2, _LABEL, "DX")
            dims = [dyd[0], dyd[1]]
            for i in range(len(dyd) - 2):
                dims.append(
                    (dyd[i + 2] - 1) * a.stride[i]
                    - a.pre_padding[i]
                    - a.post_padding[i]
                    + a.window[i]
                )
            dx.dim = dims
        infer_strides(dx, "output", dy, "input", _LABEL, check_dims=True)
        self.infer_index(dy)


_A = ResampleAttributeName
_In, _Out = ResampleBwdAttributes.InputNames, ResampleBwdAttributes.OutputNames

#: Where every slot and member of a resample backward node lives on each wire (hipDNN's
#: 9-field ``ResampleBwdAttributes`` table, reconstructed; its JSON writes the uids and members
#: on the node object itself and leaves ``index_tensor_uid`` out when there is no INDEX).
RESAMPLE_BWD_SPEC = declare_spec(
    ResampleBwdNode,
    table="ResampleBwdAttributes",
    union_tag=21,
    descriptor_type=DescriptorType.OPERATION_RESAMPLE_BWD,
    descriptor_class="ResampleBwdOperationDescriptor",
    compute_type=_A.RESAMPLE_COMP_TYPE,
    scalar_group=JSON_ON_NODE,
    omit_absent_uids=True,
    slots=(
        SlotSpec(_In.DY, False, True, 0, _A.OPERATION_RESAMPLE_BWD_DY, "dy_tensor_uid"),
        SlotSpec(_In.INDEX, False, False, 2, _A.OPERATION_RESAMPLE_BWD_INDEX, "index_tensor_uid"),
        SlotSpec(_Out.DX, True, True, 1, _A.OPERATION_RESAMPLE_BWD_DX, "dx_tensor_uid"),
    ),
    scalars=resample_scalars(),
    field_count=9,
)
