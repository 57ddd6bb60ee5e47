"""The SDPA forward node: rules and inference (hipDNN's ``SdpaFwdNode``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ..attributes.sdpa import SdpaAttributes
from ..descriptors.enums import AttributeName as A
from ..descriptors.enums import AttributeType as T
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import (
    Kind,
    ScalarSpec,
    SlotSpec,
    UnmodelledSpec,
    WireEnum,
)
from ..types import AttentionImplementation, DataType, NodeType
from . import sdpa_rules as r
from .base import declare_spec
from .input_memo import InputRuleMemo
from .sdpa_base import SdpaNode, sdpa_scalars, sdpa_slot

__all__ = ["SDPA_FWD_SPEC", "SdpaFwdNode"]


class SdpaFwdNode(SdpaNode[SdpaAttributes]):
    """Computes O = softmax(scale·QKᵀ + bias, masked)·V and, when generated, the Stats (LSE).

    Example:
        >>> import hipdnn_graph as hg
        >>> t = lambda n, d: hg.TensorAttributes(name=n, dim=d, stride=hg.generate_strides(d))
        >>> a = (hg.SdpaAttributes().set_name("fwd").set_q(t("Q", [1, 2, 8, 16]))
        ...      .set_k(t("K", [1, 2, 8, 16])).set_v(t("V", [1, 2, 8, 32]))
        ...      .set_o(hg.TensorAttributes()).set_stats(hg.TensorAttributes()))
        >>> node = hg.SdpaFwdNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_o().get_dim(), a.get_stats().get_dim()
        ([1, 2, 8, 32], [1, 2, 8, 1])
    """

    node_type: ClassVar[NodeType] = NodeType.SDPA_FWD
    label: ClassVar[str] = "SdpaFwdNode"

    #: hipDNN's pre-validation rules in order, then two of ours (dropout mask and padding
    #: tensors are checked as the backward checks them).
    rules: ClassVar[tuple[r.Rule, ...]] = (
        r.unsupported_usage,
        r.required_slots(inputs=("Q", "K", "V"), outputs=("O",)),
        r.qkv_rank4,
        r.batch_match,
        r.head_dim_match,
        r.seq_kv_match,
        r.gqa_heads,
        r.bias_shape,
        r.scale_rules,
        r.output_o_dims,
        r.dropout_mask_shape,
        r.padding_tensors,
    )
    #: this project's checks, after hipDNN's rules (see :meth:`post_validate_node`).
    checks: ClassVar[tuple[r.Rule, ...]] = (
        r.scalar_slots,
        r.bias_broadcast,
        r.finite_scale,
        r.dropout_range,
    )

    def infer_properties_node(self) -> None:
        """O ← [B, H, Sq, Dv] and Stats ← [B, H, Sq, 1] (FLOAT unless set), packed strides."""
        a = self.attributes
        stats = a.get_stats()
        if stats is not None and stats.data_type == DataType.NOT_SET:
            stats.data_type = DataType.FLOAT
        context = self.graph_attributes
        a.fill_from_context(context)
        q, v = a.get_q(), a.get_v()
        if q is None or v is None or len(q.dim) != 4 or len(v.dim) != 4:
            return
        b, h, sq, _ = q.dim
        r.infer_like(a.get_o(), [b, h, sq, v.dim[3]], context)
        r.infer_like(stats, [b, h, sq, 1], context)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """Base checks; O must not overlap itself and an explicit Stats must be [B, H, Sq, 1];
        then :attr:`checks` (scalar slots, bias broadcast, scale, dropout)."""
        super().post_validate_node()
        a = self.attributes
        q = a.get_q()
        assert q is not None
        b, h, sq, _ = q.dim
        r.check_layout(self.label, "O", a.get_o())
        r.check_output_shape(self.label, "Stats", a.get_stats(), [b, h, sq, 1], "[B, H, Sq, 1]")
        self.run_checks(memo)


_In, _Out = SdpaAttributes.InputNames, SdpaAttributes.OutputNames
#: hipDNN's ``AttentionImplementation`` schema enum (JSON spells the members' names)
_IMPLEMENTATION = WireEnum(
    "AttentionImplementation",
    AttentionImplementation,
    {m.value: m.name for m in AttentionImplementation},
)
_REQUIRED = frozenset({"Q", "K", "V", "O"})


def _slot(member: Any, fb_slot: int, attribute: A, wire: str = "") -> SlotSpec:
    output, required = isinstance(member, _Out), member.name in _REQUIRED
    return sdpa_slot(member, fb_slot, attribute, output=output, required=required, wire=wire)


def _unmodelled(group: str, first: int, attribute: int, *names: str) -> tuple[UnmodelledSpec, ...]:
    """Unmodelled tensor slots at consecutive fields and descriptor attributes."""
    return tuple(
        UnmodelledSpec(
            f"{name}_tensor_uid",
            Kind.UID_OPT,
            first + i,
            group,
            (A(attribute + i), T.BACKEND_DESCRIPTOR),
        )
        for i, name in enumerate(names)
    )


#: Where every slot and scalar of SDPA forward lives on each wire (hipDNN's ``SdpaAttributes``
#: table, 43 fields, of which the paged-attention, fp8, sink and auxiliary-output fields are not
#: modelled: they must hold their defaults; descriptor attributes 2600-2641).
SDPA_FWD_SPEC = declare_spec(
    SdpaFwdNode,
    table="SdpaAttributes",
    union_tag=12,
    descriptor_type=DescriptorType.OPERATION_SDPA_FWD,
    descriptor_class="SdpaFwdOperationDescriptor",
    compute_type=A.SDPA_FWD_COMP_TYPE_EXT,
    scalar_group="attributes",
    slots=(
        _slot(_In.Q, 0, A.OPERATION_SDPA_FWD_QDESC),
        _slot(_In.K, 1, A.OPERATION_SDPA_FWD_KDESC),
        _slot(_In.V, 2, A.OPERATION_SDPA_FWD_VDESC),
        _slot(_In.Attn_scale, 5, A.OPERATION_SDPA_FWD_SCALEDESC, "scale"),
        _slot(_In.Bias, 4, A.OPERATION_SDPA_FWD_ATTN_MASK_EXT, "attn_mask"),
        _slot(_In.SEQ_LEN_Q, 6, A.OPERATION_SDPA_FWD_SEQ_LEN_QDESC),
        _slot(_In.SEQ_LEN_KV, 7, A.OPERATION_SDPA_FWD_SEQ_LEN_KVDESC),
        _slot(_In.Seed, 8, A.OPERATION_SDPA_FWD_SEED_EXT),
        _slot(_In.Offset, 9, A.OPERATION_SDPA_FWD_OFFSET_EXT),
        _slot(_In.Dropout_mask, 10, A.OPERATION_SDPA_FWD_DROPOUT_MASK_EXT),
        _slot(_In.Dropout_scale, 11, A.OPERATION_SDPA_FWD_DROPOUT_SCALE_EXT),
        _slot(_Out.O, 3, A.OPERATION_SDPA_FWD_ODESC),
        _slot(_Out.Stats, 22, A.OPERATION_SDPA_FWD_STATSDESC),
    ),
    scalars=(
        ScalarSpec("generate_stats", Kind.BOOL_OPT, 28, (A.SDPA_FWD_GENERATE_STATS_EXT, T.BOOLEAN)),
        *sdpa_scalars("FWD", 29, 38),
    ),
    unmodelled=(
        *_unmodelled(
            "inputs",
            12,
            A.OPERATION_SDPA_FWD_PAGE_TABLE_KDESC,
            "page_table_k",
            "page_table_v",
            "block_mask",
            "sink_token",
            "descale_q",
            "descale_k",
            "descale_v",
            "descale_s",
            "scale_s",
            "scale_o",
        ),
        *_unmodelled(
            "outputs",
            23,
            A.OPERATION_SDPA_FWD_MAX_EXT,
            "max",
            "sum_exp",
            "rng_dump",
            "amax_s",
            "amax_o",
        ),
        UnmodelledSpec(
            "max_seq_len_kv",
            Kind.I32_OPT,
            37,
            "scalars",
            (A.SDPA_FWD_MAX_SEQ_LEN_KV_EXT, T.INT32),
        ),
        UnmodelledSpec(
            "mma_core_mode",
            Kind.DTYPE,
            39,
            "scalars",
            (A.SDPA_FWD_MMA_CORE_MODE_EXT, T.DATA_TYPE),
        ),
        UnmodelledSpec(
            "implementation",
            Kind.ENUM,
            40,
            "scalars",
            (A.SDPA_FWD_IMPLEMENTATION_EXT, T.ATTENTION_IMPLEMENTATION),
            _IMPLEMENTATION,
        ),
        UnmodelledSpec("umd_flops", Kind.STRING, 41, "extra"),
        UnmodelledSpec("umd_bytes", Kind.STRING, 42, "extra"),
    ),
    field_count=43,
)
