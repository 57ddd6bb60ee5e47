"""``Graph`` builder methods of attention: ``sdpa`` and ``sdpa_backward``, with
cudnn-frontend's keyword spellings (see :mod:`hipdnn_graph.sdpa_keywords`).

:class:`SdpaBuilders` is a mixin of :class:`~hipdnn_graph.Graph`.

Example:
    >>> import hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.HALF, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> q = g.tensor(name="Q", dim=[1, 2, 16, 64])
    >>> o, stats = g.sdpa(q, g.tensor_like(q, "K"), g.tensor_like(q, "V"), generate_stats=False)
    >>> o.get_name(), stats
    ('SdpaFwd_0::O', None)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Unpack

from .attributes.sdpa import SdpaAttributes
from .attributes.sdpa_backward import SdpaBackwardAttributes
from .builder_base import BuilderHost, name_unnamed, node_attributes
from .keyword_types import SdpaBackwardKeywords, SdpaKeywords
from .nodes.sdpa_bwd import SdpaBwdNode
from .nodes.sdpa_fwd import SdpaFwdNode
from .sdpa_keywords import BACKWARD_KEYWORDS, FORWARD_KEYWORDS, apply_keywords
from .tensor import TensorAttributes

if TYPE_CHECKING:
    from .nodes.base import Node

__all__ = ["SdpaBuilders"]


class SdpaBuilders(BuilderHost):
    """The attention builder methods (mixed into ``Graph``)."""

    if TYPE_CHECKING:
        _nodes: list[Node[Any]]

    def _sdpa_attributes(
        self, given: Any, node: type[Node[Any]], keywords: Mapping[str, Any], op: str, table: Any
    ) -> Any:
        attributes = node_attributes(given, node, op)
        apply_keywords(attributes, keywords, table, op)
        if not attributes.name:
            attributes.name = f"{node.name_prefix}_{len(self._nodes)}"
        return attributes

    def sdpa(
        self,
        q: TensorAttributes,
        k: TensorAttributes,
        v: TensorAttributes,
        attributes: SdpaAttributes | None = None,
        **keywords: Unpack[SdpaKeywords],
    ) -> tuple[TensorAttributes, TensorAttributes | None]:
        """Add an SDPA forward node; returns virtual ``(O, Stats)``.

        Stats is ``None`` when ``generate_stats`` is False (inference). Keywords use
        cudnn-frontend's spellings (``name``, ``attn_scale``, ``bias``, ``use_causal_mask``,
        ``use_causal_mask_bottom_right``, ``use_padding_mask``, ``seq_len_q``, ``seq_len_kv``,
        ``diagonal_alignment``, ``diagonal_band_left_bound``, ``diagonal_band_right_bound``,
        ``dropout=(p, seed, offset)`` or ``(mask, scale)``, ``generate_stats``, ``is_inference``),
        typed by :class:`~hipdnn_graph.keyword_types.SdpaKeywords` so that a type checker flags
        a misspelled keyword such as ``use_casual_mask``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an unknown keyword or wrong argument type.
        """
        a: SdpaAttributes = self._sdpa_attributes(
            attributes, SdpaFwdNode, keywords, "sdpa", FORWARD_KEYWORDS
        )
        a.set_q(q).set_k(k).set_v(v)
        o = self._output_tensor(f"{a.name}::O")
        a.set_o(o)
        stats = None
        if a.generate_stats is not False:
            stats = self._output_tensor(f"{a.name}::Stats")
            a.set_stats(stats)
        self._add_node(SdpaFwdNode(a, self.attributes))
        return o, stats

    def sdpa_backward(
        self,
        q: TensorAttributes,
        k: TensorAttributes,
        v: TensorAttributes,
        o: TensorAttributes,
        dO: TensorAttributes,
        stats: TensorAttributes,
        attributes: SdpaBackwardAttributes | None = None,
        **keywords: Unpack[SdpaBackwardKeywords],
    ) -> tuple[TensorAttributes, TensorAttributes, TensorAttributes]:
        """Add an SDPA backward node; returns virtual ``(dQ, dK, dV)`` named ``<node>::dQ`` ….

        Unnamed Q, K, V and dO inputs are renamed ``<node>::Q`` … ``<node>::dO`` (O and Stats
        keep their names). dBias is only produced when a ``dBias`` tensor is given. Keywords as in
        :meth:`sdpa`, plus ``dBias``; ``dropout`` is ``(p, seed, offset)`` or
        ``(mask, scale, scale_inv)`` (typed by
        :class:`~hipdnn_graph.keyword_types.SdpaBackwardKeywords`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an unknown keyword or wrong argument type.
        """
        a: SdpaBackwardAttributes = self._sdpa_attributes(
            attributes, SdpaBwdNode, keywords, "sdpa_backward", BACKWARD_KEYWORDS
        )
        a.set_q(q).set_k(k).set_v(v).set_o(o).set_do(dO).set_stats(stats)
        name_unnamed(a.name, ((q, "Q"), (k, "K"), (v, "V"), (dO, "dO")))
        dq = self._output_tensor(f"{a.name}::dQ")
        dk = self._output_tensor(f"{a.name}::dK")
        dv = self._output_tensor(f"{a.name}::dV")
        a.set_dq(dq).set_dk(dk).set_dv(dv)
        self._add_node(SdpaBwdNode(a, self.attributes))
        return dq, dk, dv
