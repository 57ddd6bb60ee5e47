"""``Graph`` builder methods of attention: ``sdpa`` and ``sdpa_backward``, with
cudnn-frontend's keyword spellings (see :mod:`hipdnn_graph.graph.builders.sdpa_keywords`).

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
from typing import Any, Unpack

from ...attributes.sdpa import SdpaAttributes
from ...attributes.sdpa_backward import SdpaBackwardAttributes
from ...nodes.sdpa_bwd import SDPA_BWD_SPEC
from ...nodes.sdpa_fwd import SDPA_FWD_SPEC
from ...tensor import TensorAttributes
from .base import BuilderHost, FamilyRecipe
from .keyword_types import SdpaBackwardKeywords, SdpaKeywords
from .sdpa_keywords import BACKWARD_KEYWORDS, FORWARD_KEYWORDS, apply_keywords

__all__ = ["SdpaBuilders"]


def _forward_keywords(attributes: Any, keywords: Mapping[str, Any], op: str) -> None:
    apply_keywords(attributes, keywords, FORWARD_KEYWORDS, op)


def _backward_keywords(attributes: Any, keywords: Mapping[str, Any], op: str) -> None:
    apply_keywords(attributes, keywords, BACKWARD_KEYWORDS, op)


def _stats(a: Any) -> bool:
    """SDPA forward writes Stats unless ``generate_stats`` is False (inference)."""
    return a.generate_stats is not False


def _never(_attributes: Any) -> bool:
    """SDPA backward never makes dBias: a ``dBias=`` keyword gives it."""
    return False


_SDPA: FamilyRecipe[tuple[TensorAttributes, TensorAttributes | None]] = FamilyRecipe(
    SDPA_FWD_SPEC, "sdpa", ("Q", "K", "V"), checked=False, apply=_forward_keywords,
    made_when={"Stats": _stats},
)  # fmt: skip
_SDPA_BACKWARD: FamilyRecipe[tuple[TensorAttributes, TensorAttributes, TensorAttributes]] = (
    FamilyRecipe(
        SDPA_BWD_SPEC, "sdpa_backward", ("Q", "K", "V", "O", "dO", "Stats"), checked=False,
        named=("Q", "K", "V", "dO"), apply=_backward_keywords, made_when={"dBias": _never},
        returns=("dQ", "dK", "dV"),
    )
)  # fmt: skip


class SdpaBuilders(BuilderHost):
    """The attention builder methods (mixed into ``Graph``)."""

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
        typed by :class:`~hipdnn_graph.graph.builders.keyword_types.SdpaKeywords` so that a type
        checker flags a misspelled keyword such as ``use_casual_mask``.

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an unknown keyword or wrong argument type.
        """
        return self._add_family(_SDPA, (q, k, v), attributes, keywords)

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
        :class:`~hipdnn_graph.graph.builders.keyword_types.SdpaBackwardKeywords`).

        Raises:
            HipdnnError: ``INVALID_VALUE`` for an unknown keyword or wrong argument type.
        """
        inputs = (q, k, v, o, dO, stats)
        return self._add_family(_SDPA_BACKWARD, inputs, attributes, keywords)
