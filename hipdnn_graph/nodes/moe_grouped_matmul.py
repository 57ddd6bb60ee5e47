"""The MoE grouped matmul node: rules, inference and wire declaration (hipDNN's
``MoeGroupedMatmulNode``).

hipDNN's rules (``hipdnn_frontend/node/MoeGroupedMatmulNode.hpp``), in its order; see
``docs/spec-families.md`` for the table of checks and messages.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from ..attributes.moe_grouped_matmul import MoeGroupedMatmulAttributes
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    JSON_SCALARS_ON_NODE,
    Kind,
    ScalarSpec,
    SlotSpec,
    WireEnum,
)
from ..tensor import TensorAttributes, generate_strides
from ..types import DataType, MoeGroupedMatmulMode, NodeType
from .base import Node, declare_spec
from .input_memo import InputRuleMemo
from .rules import check_min_dims, invalid, missing

__all__ = [
    "MOE_GROUPED_MATMUL_MODE",
    "MOE_GROUPED_MATMUL_SPEC",
    "MoeGroupedMatmulAttributeName",
    "MoeGroupedMatmulNode",
    "check_exact_rank",
]

#: the rank of every MoE tensor
MOE_RANK = 3


def check_exact_rank(tensor: TensorAttributes, message: str) -> None:
    """Refuse a tensor whose rank is not 3 with ``message`` (``INVALID_VALUE``)."""
    if len(tensor.dim) != MOE_RANK:
        raise invalid(message)


def _routing_tensor(tensor: TensorAttributes | None, name: str) -> TensorAttributes:
    """hipDNN's routing-tensor checks (TOKEN_INDEX, TOKEN_KS): set, INT32, shape [1, n, 1]."""
    if tensor is None:
        raise missing(f"MoeGroupedMatmulNode missing {name} input")
    if tensor.data_type != DataType.INT32:
        raise invalid(f"{name} must have INT32 data type")
    check_min_dims(tensor, MOE_RANK, name)
    check_exact_rank(tensor, f"{name} must have shape [1, routed_tokens, 1]")
    if tensor.dim[0] != 1:
        raise invalid(f"{name} must have a singleton leading dimension")
    if tensor.dim[2] != 1:
        raise invalid(f"{name} must have a singleton trailing dimension")
    return tensor


class MoeGroupedMatmulNode(Node[MoeGroupedMatmulAttributes]):
    """Multiplies each group of routed TOKEN rows by its expert's ``WEIGHT [K, N]``.

    Example:
        >>> import hipdnn_graph as hg
        >>> a = (hg.MoeGroupedMatmulAttributes()
        ...      .set_token(hg.TensorAttributes(dim=[1, 8, 16]))
        ...      .set_weight(hg.TensorAttributes(dim=[2, 16, 32]))
        ...      .set_first_token_offset(
        ...          hg.TensorAttributes(dim=[2, 1, 1], data_type=hg.DataType.INT32))
        ...      .set_output(hg.TensorAttributes()))
        >>> node = hg.MoeGroupedMatmulNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_output().get_dim(), a.get_output().get_stride()
        ([1, 8, 32], [256, 32, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.MOE_GROUPED_MATMUL

    def _required(
        self,
    ) -> tuple[TensorAttributes, TensorAttributes, TensorAttributes, TensorAttributes]:
        """TOKEN, WEIGHT, FIRST_TOKEN_OFFSET and OUTPUT, each set (hipDNN's first checks)."""
        a = self.attributes
        tensors = (a.get_token(), a.get_weight(), a.get_first_token_offset(), a.get_output())
        whats = ("token input", "weight input", "first_token_offset input", "output")
        for tensor, what in zip(tensors, whats, strict=True):
            if tensor is None:
                raise missing(f"MoeGroupedMatmulNode missing {what}")
        token, weight, offsets, output = tensors
        assert token is not None and weight is not None
        assert offsets is not None and output is not None
        return token, weight, offsets, output

    def pre_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """hipDNN's checks, in order: TOKEN, WEIGHT, FIRST_TOKEN_OFFSET and OUTPUT set; the
        three inputs of rank >= 3, then exactly 3; TOKEN ``[1, tokens, K]``, the offsets
        ``[G, 1, 1]``; TOKEN's K equals WEIGHT's; at least one expert; G a multiple of the
        expert count; INT32 offsets; then the mode's routing tensors and ``top_k``.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing tensor, ``INVALID_VALUE`` for the
                others (an unset mode among them).
        """
        a = self.attributes
        token, weight, offsets, _ = self._required()
        check_min_dims(token, MOE_RANK, "MoE token tensor")
        check_min_dims(weight, MOE_RANK, "MoE weight tensor")
        check_min_dims(offsets, MOE_RANK, "MoE first-token-offset tensor")
        check_exact_rank(token, "MoE token tensor must have shape [1, tokens, K]")
        check_exact_rank(weight, "MoE weight tensor must have shape [experts, K, N]")
        check_exact_rank(
            offsets, "MoE first-token-offset tensor must have shape [batch * experts, 1, 1]"
        )
        if token.dim[0] != 1:
            raise invalid("MoE token tensor must have a singleton leading dimension")
        if offsets.dim[1] != 1 or offsets.dim[2] != 1:
            raise invalid("MoE first-token-offset tensor must have trailing dimensions [1, 1]")
        if token.dim[2] != weight.dim[1]:
            raise invalid("MoE token K dimension must match the weight K dimension")
        experts = weight.dim[0]
        if experts <= 0:
            raise invalid("MoE weight tensor must describe at least one expert")
        if offsets.dim[0] % experts != 0:
            raise invalid("MoE first-token-offset tensor length must be divisible by expert count")
        if offsets.data_type != DataType.INT32:
            raise invalid("MoE first-token-offset tensor must have INT32 data type")
        mode = a.mode
        if mode == MoeGroupedMatmulMode.GATHER:
            _routing_tensor(a.get_token_index(), "MoE token-index tensor")
        elif mode == MoeGroupedMatmulMode.SCATTER:
            index = _routing_tensor(a.get_token_index(), "MoE token-index tensor")
            ks = _routing_tensor(a.get_token_ks(), "MoE token-ks tensor")
            if index.dim[1] != ks.dim[1]:
                raise invalid(
                    "MoE token-index and token-ks tensors must have the same routed-token count"
                )
            if a.top_k <= 0:
                raise invalid("MoE SCATTER mode requires top_k to be positive")
            if a.top_k > experts:
                raise invalid("MoE top_k must not exceed the number of experts")
        elif mode != MoeGroupedMatmulMode.NONE:
            raise invalid("MoeGroupedMatmulNode has an unknown routing mode")

    def infer_properties_node(self) -> None:
        """Fill data types; OUTPUT is ``[1, rows, N]`` (``rows`` TOKEN_INDEX's in ``GATHER``
        mode, TOKEN's otherwise): set when it has no dims, else checked; packed strides when
        it has none. The pre-validation rules run first (hipDNN assumes they passed; here a
        direct call cannot index a missing dim).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for OUTPUT dims other than the inferred ones;
                ``ATTRIBUTE_NOT_SET`` for a missing tensor.
        """
        self.pre_validate_node()
        a = self.attributes
        token, weight, _, output = self._required()
        rows_from = token
        if a.mode == MoeGroupedMatmulMode.GATHER:
            rows_from = _routing_tensor(a.get_token_index(), "MoE token-index tensor")
        a.fill_from_context(self.graph_attributes)
        expected = [1, rows_from.dim[1], weight.dim[2]]
        if not output.dim:
            output.dim = expected
        elif list(output.dim) != expected:
            raise invalid(
                "MoeGroupedMatmul output tensor dimensions do not match the inferred dimensions"
            )
        if not output.stride:
            output.stride = generate_strides(output.dim)


class MoeGroupedMatmulAttributeName(IntEnum):
    """hipDNN's backend attribute ids of the MoE grouped matmul operation descriptor
    (``HipdnnBackendAttributeName.h``, 3700-3708)."""

    OPERATION_MOE_GROUPED_MATMUL_TOKEN_DESC = 3700
    OPERATION_MOE_GROUPED_MATMUL_WEIGHT_DESC = 3701
    OPERATION_MOE_GROUPED_MATMUL_FIRST_TOKEN_OFFSET_DESC = 3702
    OPERATION_MOE_GROUPED_MATMUL_TOKEN_INDEX_DESC = 3703
    OPERATION_MOE_GROUPED_MATMUL_TOKEN_KS_DESC = 3704
    OPERATION_MOE_GROUPED_MATMUL_OUTPUT_DESC = 3705
    OPERATION_MOE_GROUPED_MATMUL_MODE = 3706
    OPERATION_MOE_GROUPED_MATMUL_TOP_K = 3707
    OPERATION_MOE_GROUPED_MATMUL_MATH_PREC = 3708


_A = MoeGroupedMatmulAttributeName
_In, _Out = MoeGroupedMatmulAttributes.InputNames, MoeGroupedMatmulAttributes.OutputNames

#: hipDNN's ``MoeGroupedMatmulMode`` schema enum (``NONE`` 0, ``GATHER`` 1, ``SCATTER`` 2; no
#: ``NOT_SET``); its JSON writes the lower-case names.
MOE_GROUPED_MATMUL_MODE = WireEnum(
    "MoeGroupedMatmulMode",
    MoeGroupedMatmulMode,
    {m.value: m.name.lower() for m in MoeGroupedMatmulMode if m.value >= 0},
)

#: Where every slot and member of a MoE grouped matmul node lives on each wire (hipDNN's 8-field
#: ``MoeGroupedMatmulAttributes`` table, moe_grouped_matmul_attributes.fbs; its JSON keeps the
#: uids in ``inputs``/``outputs``, leaves an absent routing tensor's key out, and writes ``mode``
#: and ``top_k`` on the node object).
MOE_GROUPED_MATMUL_SPEC = declare_spec(
    MoeGroupedMatmulNode,
    table="MoeGroupedMatmulAttributes",
    union_tag=22,
    descriptor_type=DescriptorType.OPERATION_MOE_GROUPED_MATMUL,
    descriptor_class="MoeGroupedMatmulOperationDescriptor",
    compute_type=_A.OPERATION_MOE_GROUPED_MATMUL_MATH_PREC,
    scalar_group=JSON_SCALARS_ON_NODE,
    omit_absent_uids=True,
    slots=(
        SlotSpec(
            _In.TOKEN,
            False,
            True,
            0,
            _A.OPERATION_MOE_GROUPED_MATMUL_TOKEN_DESC,
            "token_tensor_uid",
        ),
        SlotSpec(
            _In.WEIGHT,
            False,
            True,
            1,
            _A.OPERATION_MOE_GROUPED_MATMUL_WEIGHT_DESC,
            "weight_tensor_uid",
        ),
        SlotSpec(
            _In.FIRST_TOKEN_OFFSET,
            False,
            True,
            2,
            _A.OPERATION_MOE_GROUPED_MATMUL_FIRST_TOKEN_OFFSET_DESC,
            "first_token_offset_tensor_uid",
        ),
        SlotSpec(
            _In.TOKEN_INDEX,
            False,
            False,
            3,
            _A.OPERATION_MOE_GROUPED_MATMUL_TOKEN_INDEX_DESC,
            "token_index_tensor_uid",
        ),
        SlotSpec(
            _In.TOKEN_KS,
            False,
            False,
            4,
            _A.OPERATION_MOE_GROUPED_MATMUL_TOKEN_KS_DESC,
            "token_ks_tensor_uid",
        ),
        SlotSpec(
            _Out.OUTPUT,
            True,
            True,
            5,
            _A.OPERATION_MOE_GROUPED_MATMUL_OUTPUT_DESC,
            "output_tensor_uid",
        ),
    ),
    scalars=(
        ScalarSpec(
            "mode",
            Kind.ENUM,
            6,
            (_A.OPERATION_MOE_GROUPED_MATMUL_MODE, T.MOE_GROUPED_MATMUL_MODE),
            always=True,
            enum=MOE_GROUPED_MATMUL_MODE,
        ),
        ScalarSpec(
            "top_k", Kind.I32, 7, (_A.OPERATION_MOE_GROUPED_MATMUL_TOP_K, T.INT32), always=True
        ),
    ),
    field_count=8,
)
