"""The MoE grouped matmul backward node: rules, inference and wire declaration (hipDNN's
``MoeGroupedMatmulBwdNode``).

hipDNN's rules (``hipdnn_frontend/node/MoeGroupedMatmulBwdNode.hpp``, the version that infers
DWEIGHT from the offsets), in its order; see ``docs/spec-families.md`` for the table of checks
and messages.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.moe_grouped_matmul import MoeGroupedMatmulBwdAttributes
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import SlotSpec
from ..tensor import TensorAttributes
from ..types import DataType, NodeType
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .moe_grouped_matmul import MOE_RANK, check_exact_rank
from .rules import PRE_VALIDATION, SETTING_PROPERTIES, check_min_dims, invalid, missing, required

__all__ = [
    "MOE_GROUPED_MATMUL_BWD_SPEC",
    "MoeGroupedMatmulBwdAttributeName",
    "MoeGroupedMatmulBwdNode",
    "column_major_strides",
]

_LABEL = "MoeGroupedMatmulBwdNode"

#: the four tensors hipDNN checks set, in its order, as its pre-validation messages name them
_REQUIRED = ("doutput (input)", "token (input)", "first_token_offset (input)", "dweight (output)")


def column_major_strides(dims: list[int]) -> list[int]:
    """Packed strides of ``[experts, K, N]`` with K fastest, then N, then the experts
    (``[K * N, 1, K]``): the layout hipDNN gives DWEIGHT when its strides are unset.

    Example:
        >>> column_major_strides([2, 16, 32])
        [512, 1, 16]
    """
    _experts, k, n = dims
    return [k * n, 1, k]


class MoeGroupedMatmulBwdNode(Node[MoeGroupedMatmulBwdAttributes]):
    """Computes each expert's weight gradient ``DWEIGHT[e] = TOKEN[rows(e)]^T @ DOUTPUT[rows(e)]``.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.MoeGroupedMatmulBwdAttributes()
        ...      .set_doutput(hg.TensorAttributes(dim=[1, 8, 32]))
        ...      .set_token(hg.TensorAttributes(dim=[1, 8, 16]))
        ...      .set_first_token_offset(
        ...          hg.TensorAttributes(dim=[2, 1, 1], data_type=hg.DataType.INT32))
        ...      .set_dweight(hg.TensorAttributes()))
        >>> node = hg.MoeGroupedMatmulBwdNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_dweight().get_dim(), a.get_dweight().get_stride()
        ([2, 16, 32], [512, 1, 16])
    """

    node_type: ClassVar[NodeType] = NodeType.MOE_GROUPED_MATMUL_BWD

    def _tensors(
        self, step: str
    ) -> tuple[TensorAttributes, TensorAttributes, TensorAttributes, TensorAttributes]:
        """DOUTPUT, TOKEN, FIRST_TOKEN_OFFSET and DWEIGHT, each set (hipDNN's messages name the
        lifecycle ``step``)."""
        dout, token, offsets, dweight = required(self.attributes, _LABEL, _REQUIRED, step)
        return dout, token, offsets, dweight

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: the four tensors set; the three inputs with dims; each of
        rank >= 3; DOUTPUT and TOKEN of rank 3 with a leading 1 and one token count; the
        offsets ``[experts, 1, 1]`` with at least one expert, INT32. DWEIGHT's dims are checked
        by :meth:`infer_properties_node`.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor or dims, ``INVALID_VALUE``
                for the others.
        """
        dout, token, offsets, _ = self._tensors(PRE_VALIDATION)
        for tensor, what in ((dout, "doutput"), (token, "token"), (offsets, "first_token_offset")):
            if not tensor.dim:
                raise missing(f"{_LABEL} missing {what} dimensions for pre-validation")
        check_min_dims(dout, MOE_RANK, "MoE doutput tensor")
        check_min_dims(token, MOE_RANK, "MoE token tensor")
        check_min_dims(offsets, MOE_RANK, "MoE first_token_offset tensor")
        check_exact_rank(dout, "MoE doutput tensor must have rank 3")
        check_exact_rank(token, "MoE token tensor must have rank 3")
        if dout.dim[0] != 1:
            raise invalid("MoE doutput tensor must have a singleton leading dimension")
        if token.dim[0] != 1:
            raise invalid("MoE token tensor must have a singleton leading dimension")
        if dout.dim[1] != token.dim[1]:
            raise invalid("MoE doutput token-count dimension must match the token tensor")
        check_exact_rank(offsets, "MoE first-token-offset tensor must have shape [experts, 1, 1]")
        if offsets.dim[1] != 1 or offsets.dim[2] != 1:
            raise invalid("MoE first-token-offset tensor must have trailing dimensions [1, 1]")
        if offsets.dim[0] <= 0:
            raise invalid("MoE first-token-offset tensor must describe at least one expert")
        if offsets.data_type != DataType.INT32:
            raise invalid("MoE first-token-offset tensor must have INT32 data type")

    def infer_properties_node(self) -> None:
        """Fill data types; DWEIGHT is ``[experts, K, N]`` (the offsets' count, TOKEN's K,
        DOUTPUT's N): set when it has no dims, else checked; column-major packed strides
        (:func:`column_major_strides`) when it has none. After hipDNN's presence checks the
        pre-validation rules run again (a direct call cannot index a missing dim).

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor, ``INVALID_VALUE`` for
                DWEIGHT dims other than the inferred ones.
        """
        dout, token, offsets, dweight = self._tensors(SETTING_PROPERTIES)
        self.pre_validate_node()
        self.attributes.fill_from_context(self.graph_attributes)
        expected = [offsets.dim[0], token.dim[2], dout.dim[2]]
        if not dweight.dim:
            dweight.dim = expected
        elif list(dweight.dim) != expected:
            raise invalid(
                "MoeGroupedMatmulBwd dweight tensor dimensions do not match the inferred dimensions"
            )
        if not dweight.stride:
            dweight.stride = column_major_strides(list(dweight.dim))


class MoeGroupedMatmulBwdAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the MoE grouped matmul backward operation descriptor
    (``HipdnnBackendAttributeName.h``, 3800-3804)."""

    OPERATION_MOE_GROUPED_MATMUL_BWD_DOUTPUT_DESC = 3800
    OPERATION_MOE_GROUPED_MATMUL_BWD_TOKEN_DESC = 3801
    OPERATION_MOE_GROUPED_MATMUL_BWD_FIRST_TOKEN_OFFSET_DESC = 3802
    OPERATION_MOE_GROUPED_MATMUL_BWD_DWEIGHT_DESC = 3803
    OPERATION_MOE_GROUPED_MATMUL_BWD_MATH_PREC = 3804


_A = MoeGroupedMatmulBwdAttributeName
_In, _Out = MoeGroupedMatmulBwdAttributes.InputNames, MoeGroupedMatmulBwdAttributes.OutputNames

#: Where every slot of a MoE grouped matmul backward node lives on each wire (hipDNN's 4-field
#: ``MoeGroupedMatmulBwdAttributes`` table, moe_grouped_matmul_bwd_attributes.fbs; its JSON has
#: no scalar object).
MOE_GROUPED_MATMUL_BWD_SPEC = declare_spec(
    MoeGroupedMatmulBwdNode,
    table="MoeGroupedMatmulBwdAttributes",
    union_tag=23,
    descriptor_type=DescriptorType.OPERATION_MOE_GROUPED_MATMUL_BWD,
    descriptor_class="MoeGroupedMatmulBwdOperationDescriptor",
    compute_type=_A.OPERATION_MOE_GROUPED_MATMUL_BWD_MATH_PREC,
    scalar_group="",
    slots=(
        SlotSpec(
            _In.DOUTPUT,
            False,
            True,
            0,
            _A.OPERATION_MOE_GROUPED_MATMUL_BWD_DOUTPUT_DESC,
            "doutput_tensor_uid",
        ),
        SlotSpec(
            _In.TOKEN,
            False,
            True,
            1,
            _A.OPERATION_MOE_GROUPED_MATMUL_BWD_TOKEN_DESC,
            "token_tensor_uid",
        ),
        SlotSpec(
            _In.FIRST_TOKEN_OFFSET,
            False,
            True,
            2,
            _A.OPERATION_MOE_GROUPED_MATMUL_BWD_FIRST_TOKEN_OFFSET_DESC,
            "first_token_offset_tensor_uid",
        ),
        SlotSpec(
            _Out.DWEIGHT,
            True,
            True,
            3,
            _A.OPERATION_MOE_GROUPED_MATMUL_BWD_DWEIGHT_DESC,
            "dweight_tensor_uid",
        ),
    ),
    field_count=4,
)
