"""The SDPA backward node: rules, inference and post-validation (hipDNN's ``SdpaBwdNode``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ..attributes.sdpa_backward import SdpaBackwardAttributes
from ..descriptors.enums import AttributeName as A
from ..descriptors.enums import DescriptorType
from ..descriptors.node_spec import SlotSpec
from ..types import NodeType
from . import sdpa_rules as r
from .base import declare_spec
from .input_memo import InputRuleMemo
from .rules import invalid
from .sdpa_base import SdpaNode, sdpa_scalars, sdpa_slot

__all__ = ["SDPA_BWD_SPEC", "SdpaBwdNode"]


_In, _Out = SdpaBackwardAttributes.InputNames, SdpaBackwardAttributes.OutputNames

#: each gradient, the input whose dims it takes and must keep, and their slot names
_GRADIENTS = tuple(
    (grad, source, grad.name, source.name)
    for grad, source in ((_Out.dQ, _In.Q), (_Out.dK, _In.K), (_Out.dV, _In.V))
)


class SdpaBwdNode(SdpaNode[SdpaBackwardAttributes]):
    """Computes dQ, dK, dV (and dBias) from Q, K, V, O, dO and the softmax Stats.

    Example:
        >>> import hipdnn_graph as hg
        >>> t = lambda n, d: hg.TensorAttributes(name=n, dim=d, stride=hg.generate_strides(d))
        >>> x = [1, 2, 8, 16]
        >>> a = (hg.SdpaBackwardAttributes().set_name("bwd")
        ...      .set_q(t("Q", x)).set_k(t("K", x)).set_v(t("V", x))
        ...      .set_o(t("O", x)).set_do(t("dO", x))
        ...      .set_stats(t("Stats", [1, 2, 8, 1]))
        ...      .set_dq(hg.TensorAttributes()).set_dk(hg.TensorAttributes())
        ...      .set_dv(hg.TensorAttributes()))
        >>> node = hg.SdpaBwdNode(a, hg.GraphAttributes())
        >>> node.pre_validate_node(); node.infer_properties_node()
        >>> a.get_dq().get_dim()
        [1, 2, 8, 16]
    """

    node_type: ClassVar[NodeType] = NodeType.SDPA_BWD
    label: ClassVar[str] = "SdpaBwdNode"

    #: hipDNN's pre-validation rules, in order; the first failure raises.
    rules: ClassVar[tuple[r.Rule, ...]] = (
        r.unsupported_usage,
        r.required_slots(inputs=("Q", "K", "V", "O", "dO", "Stats"), outputs=("dQ", "dK", "dV")),
        r.qkv_rank4,
        r.batch_match,
        r.head_dim_match,
        r.seq_kv_match,
        r.gqa_heads,
        r.do_matches_o,
        r.bias_shape,
        r.dropout_mask_shape,
        r.padding_tensors,
        r.scale_rules,
    )
    #: this project's checks, after hipDNN's rules (see :meth:`post_validate_node`).
    checks: ClassVar[tuple[r.Rule, ...]] = (
        r.scalar_slots,
        r.backward_input_shapes,
        r.bias_broadcast,
        r.finite_scale,
        r.dropout_range,
    )

    def infer_properties_node(self) -> None:
        """Fill types from the graph; dQ/dK/dV take Q/K/V's dims and packed strides if unset.

        dBias, when set and shapeless, takes the Bias's dims (an addition to hipDNN). Each
        gradient gets its type, dims and strides in one change; ``fill_from_context`` then fills
        the other tensors' types and the compute type (the order does not matter: a type never
        depends on dims, nor dims on a type).
        """
        a = self.attributes
        context = self.graph_attributes
        inputs, outputs = a.inputs, a.outputs
        for grad, source, _, _ in _GRADIENTS:
            if (tensor := inputs.get(source)) is not None:
                r.infer_like(outputs.get(grad), tensor.dim, context)
        bias = inputs.get(_In.Bias)
        if bias is not None:
            r.infer_like(outputs.get(_Out.dBias), bias.dim, context)
        a.fill_from_context(context)

    def post_validate_node(self, memo: InputRuleMemo | None = None) -> None:
        """Base checks, then explicit gradient shapes must agree with Q, K, V (and Bias), then
        :attr:`checks` (O, dO and Stats shapes, scalar slots, bias broadcast, scale, dropout).

        Raises:
            HipdnnError: ``INVALID_VALUE`` when dQ/dK/dV/dBias dims disagree with their source
                or their strides overlap, or a check fails.
        """
        super().post_validate_node()
        a, label = self.attributes, self.label
        inputs, outputs = a.inputs, a.outputs
        for grad, source, grad_name, source_name in _GRADIENTS:  # Q, K, V: set (pre-validated)
            expected = inputs[source].dim
            r.check_output_shape(label, grad_name, outputs.get(grad), expected, source_name)
        dbias = outputs.get(_Out.dBias)
        if dbias is not None:
            bias = inputs.get(_In.Bias)
            if bias is None:
                raise invalid(f"{label}: dBias requires a Bias input")
            r.check_output_shape(label, "dBias", dbias, bias.dim, "Bias")
        self.run_checks(memo)


def _slot(member: Any, fb_slot: int, attribute: A, wire: str = "") -> SlotSpec:
    output = isinstance(member, _Out)
    return sdpa_slot(member, fb_slot, attribute, output=output, required=fb_slot < 9, wire=wire)


#: Where every slot and scalar of SDPA backward lives on each wire (hipDNN's
#: ``SdpaBackwardAttributes`` table, 28 fields; descriptor attributes 3100-3128).
SDPA_BWD_SPEC = declare_spec(
    SdpaBwdNode,
    table="SdpaBackwardAttributes",
    union_tag=15,
    descriptor_type=DescriptorType.OPERATION_SDPA_BWD_DESCRIPTOR_EXT,
    descriptor_class="SdpaBwdOperationDescriptor",
    compute_type=A.SDPA_BWD_COMP_TYPE_EXT,
    scalar_group="parameters",
    legacy_scalar_groups=("attributes",),
    slots=(
        _slot(_In.Q, 0, A.OPERATION_SDPA_BWD_Q_EXT),
        _slot(_In.K, 1, A.OPERATION_SDPA_BWD_K_EXT),
        _slot(_In.V, 2, A.OPERATION_SDPA_BWD_V_EXT),
        _slot(_In.O, 3, A.OPERATION_SDPA_BWD_O_EXT),
        _slot(_In.dO, 4, A.OPERATION_SDPA_BWD_DO_EXT),
        _slot(_In.Stats, 5, A.OPERATION_SDPA_BWD_STATS_EXT),
        _slot(_In.Attn_scale, 9, A.OPERATION_SDPA_BWD_SCALE_EXT, "scale"),
        _slot(_In.Bias, 10, A.OPERATION_SDPA_BWD_ATTN_MASK_EXT, "attn_mask"),
        _slot(_In.SEQ_LEN_Q, 11, A.OPERATION_SDPA_BWD_SEQ_LEN_Q_EXT),
        _slot(_In.SEQ_LEN_KV, 12, A.OPERATION_SDPA_BWD_SEQ_LEN_KV_EXT),
        _slot(_In.Seed, 13, A.OPERATION_SDPA_BWD_SEED_EXT),
        _slot(_In.Offset, 14, A.OPERATION_SDPA_BWD_OFFSET_EXT),
        _slot(_In.Dropout_mask, 15, A.OPERATION_SDPA_BWD_DROPOUT_MASK_EXT),
        _slot(_In.Dropout_scale, 16, A.OPERATION_SDPA_BWD_DROPOUT_SCALE_EXT),
        _slot(
            _In.Dropout_scale_inv,
            17,
            A.OPERATION_SDPA_BWD_DROPOUT_SCALE_INV_EXT,
        ),
        _slot(_Out.dQ, 6, A.OPERATION_SDPA_BWD_DQ_EXT),
        _slot(_Out.dK, 7, A.OPERATION_SDPA_BWD_DK_EXT),
        _slot(_Out.dV, 8, A.OPERATION_SDPA_BWD_DV_EXT),
        _slot(_Out.dBias, 18, A.OPERATION_SDPA_BWD_DBIAS_EXT),
    ),
    scalars=sdpa_scalars("BWD", 19, 27),
    field_count=28,
)
