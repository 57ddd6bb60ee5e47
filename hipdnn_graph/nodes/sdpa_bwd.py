"""The SDPA backward node: rules, inference and post-validation (hipDNN's ``SdpaBwdNode``)."""

from __future__ import annotations

from collections.abc import MutableMapping, MutableSequence
from typing import ClassVar

from ..attributes.sdpa_backward import SdpaBackwardAttributes
from ..descriptors.backend_descriptor import BackendDescriptor
from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..types import ErrorCode, NodeType
from . import sdpa_rules as r
from .base import Node
from .sdpa_packing import BWD_TABLE, pack_sdpa, unpack_sdpa

__all__ = ["SdpaBwdNode"]


class SdpaBwdNode(Node[SdpaBackwardAttributes]):
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

    def pre_validate_node(self) -> None:
        """Check every rule of :attr:`rules` in order.

        Raises:
            HipdnnError: ``ATTRIBUTE_NOT_SET`` for a missing slot or seq-len tensor,
                ``INVALID_VALUE`` for a shape, type or unsupported-usage rule.
        """
        for rule in self.rules:
            rule(self.attributes, self.label)

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
        """Base checks, then explicit gradient shapes must agree with Q, K, V (and Bias).

        Raises:
            HipdnnError: ``INVALID_VALUE`` when dQ/dK/dV/dBias dims disagree with their source
                or their strides overlap.
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

    # ----- descriptors (spec §7) -----
    def create_operation(
        self,
        tensor_descs: MutableMapping[int, BackendDescriptor],
        operations: MutableSequence[BackendDescriptor],
    ) -> BackendDescriptor:
        """Pack this node into a finalized operation descriptor appended to ``operations``.

        Tensor descriptors are created once per uid in ``tensor_descs`` and shared by uid.
        """
        return pack_sdpa(self.attributes, BWD_TABLE, tensor_descs, operations)

    def unpack_from_descriptor(
        self, op_desc: BackendDescriptor, tensor_map: MutableMapping[int, TensorAttributes]
    ) -> SdpaBwdNode:
        """Replace this node's attributes with those packed in ``op_desc``.

        Tensors are looked up in (or added to) ``tensor_map`` by uid, so nodes that share a
        tensor share the rebuilt handle.
        """
        attributes = SdpaBackwardAttributes()
        unpack_sdpa(op_desc, BWD_TABLE, attributes, tensor_map)
        self.attributes = attributes
        return self
