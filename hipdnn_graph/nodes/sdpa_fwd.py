"""The SDPA forward node: rules and inference (hipDNN's ``SdpaFwdNode``)."""

from __future__ import annotations

from typing import Any, ClassVar

from ..attributes.sdpa import SdpaAttributes
from ..types import DataType, NodeType
from . import sdpa_rules as r
from .sdpa_base import SdpaNode
from .sdpa_packing import FWD_TABLE, PackingTable

__all__ = ["SdpaFwdNode"]


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
    name_prefix: ClassVar[str] = "SdpaFwd"
    label: ClassVar[str] = "SdpaFwdNode"
    packing: ClassVar[PackingTable] = FWD_TABLE
    attributes_class: ClassVar[type[Any]] = SdpaAttributes

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
        a.fill_from_context(self.graph_attributes)
        q, v = a.get_q(), a.get_v()
        if q is None or v is None or len(q.dim) != 4 or len(v.dim) != 4:
            return
        b, h, sq, _ = q.dim
        r.infer_like(a.get_o(), [b, h, sq, v.dim[3]])
        r.infer_like(stats, [b, h, sq, 1])

    def post_validate_node(self) -> None:
        """Base checks; O must not overlap itself and an explicit Stats must be [B, H, Sq, 1];
        then :attr:`checks` (scalar slots, bias broadcast, scale, dropout)."""
        super().post_validate_node()
        a = self.attributes
        q = a.get_q()
        assert q is not None
        b, h, sq, _ = q.dim
        r.check_layout(self.label, "O", a.get_o())
        r.check_output_shape(self.label, "Stats", a.get_stats(), [b, h, sq, 1], "[B, H, Sq, 1]")
        self.run_checks()
