"""The SDPA backward node: rules, inference and post-validation (hipDNN's ``SdpaBwdNode``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ..attributes.sdpa_backward import SdpaBackwardAttributes
from ..errors import HipdnnError
from ..types import ErrorCode, NodeType
from . import sdpa_rules as r
from .sdpa_base import SdpaNode
from .sdpa_packing import BWD_TABLE, PackingTable

__all__ = ["SdpaBwdNode"]


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
    name_prefix: ClassVar[str] = "SdpaBwd"
    label: ClassVar[str] = "SdpaBwdNode"
    packing: ClassVar[PackingTable] = BWD_TABLE
    attributes_class: ClassVar[type[Any]] = SdpaBackwardAttributes

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

        dBias, when set and shapeless, takes the Bias's dims (an addition to hipDNN).
        """
        a = self.attributes
        a.fill_from_context(self.graph_attributes)
        for grad, source in (
            (a.get_dq(), a.get_q()),
            (a.get_dk(), a.get_k()),
            (a.get_dv(), a.get_v()),
        ):
            if source is not None:
                r.infer_like(grad, source.dim)
        bias = a.get_bias()
        if bias is not None:
            r.infer_like(a.get_dbias(), bias.dim)

    def post_validate_node(self) -> None:
        """Base checks, then explicit gradient shapes must agree with Q, K, V (and Bias), then
        :attr:`checks` (O, dO and Stats shapes, scalar slots, bias broadcast, scale, dropout).

        Raises:
            HipdnnError: ``INVALID_VALUE`` when dQ/dK/dV/dBias dims disagree with their source
                or their strides overlap, or a check fails.
        """
        super().post_validate_node()
        a = self.attributes
        for label, grad, source, src_label in (
            ("dQ", a.get_dq(), a.get_q(), "Q"),
            ("dK", a.get_dk(), a.get_k(), "K"),
            ("dV", a.get_dv(), a.get_v(), "V"),
        ):
            assert source is not None
            r.check_output_shape(self.label, label, grad, source.dim, src_label)
        dbias, bias = a.get_dbias(), a.get_bias()
        if dbias is not None:
            if bias is None:
                raise HipdnnError(
                    ErrorCode.INVALID_VALUE, f"{self.label}: dBias requires a Bias input"
                )
            r.check_output_shape(self.label, "dBias", dbias, bias.dim, "Bias")
        self.run_checks()
