"""The keywords of :meth:`Graph.tensor`, :meth:`Graph.sdpa` and :meth:`Graph.sdpa_backward`, as
typed dictionaries (PEP 692), so that a type checker catches a misspelled keyword
(``use_casual_mask``) or a value of the wrong type before the call raises ``INVALID_VALUE``.

Every key is optional (``total=False``). The SDPA keys are cudnn-frontend's spellings, one per
setter of :mod:`hipdnn_graph.graph.builders.sdpa_keywords`' tables; ``None`` means "not given",
as there. The tensor keys are the fields of :class:`~hipdnn_graph.TensorAttributes`.

Example:
    >>> from hipdnn_graph.graph.builders.keyword_types import SdpaKeywords
    >>> sorted(SdpaKeywords.__optional_keys__)[:3]
    ['attn_scale', 'bias', 'compute_data_type']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import SupportsIndex, TypedDict

import numpy as np

from ...tensor import TensorAttributes
from ...types import DataType, DiagonalAlignment

__all__ = ["SdpaBackwardKeywords", "SdpaKeywords", "TensorKeywords"]


class TensorKeywords(TypedDict, total=False):
    """The keywords of ``Graph.tensor(**keywords)``: the fields of ``TensorAttributes``."""

    uid: SupportsIndex | None
    name: str
    data_type: DataType | int
    dim: Sequence[SupportsIndex]
    stride: Sequence[SupportsIndex]
    is_virtual: bool | np.bool_
    is_pass_by_value: bool | np.bool_
    value: bool | int | float | np.generic | None
    alignment: SupportsIndex
    ragged_offset: TensorAttributes | None
    ragged_offset_multiplier: SupportsIndex


class _SdpaCommonKeywords(TypedDict, total=False):
    name: str | None
    compute_data_type: DataType | int | None
    attn_scale: TensorAttributes | float | None
    bias: TensorAttributes | None
    use_alibi_mask: bool | None
    use_padding_mask: bool | None
    seq_len_q: TensorAttributes | None
    seq_len_kv: TensorAttributes | None
    use_causal_mask: bool | None
    use_causal_mask_bottom_right: bool | None
    diagonal_alignment: DiagonalAlignment | int | None
    diagonal_band_left_bound: int | None
    diagonal_band_right_bound: int | None
    sliding_window_length: int | None


class SdpaKeywords(_SdpaCommonKeywords, total=False):
    """The keywords of ``Graph.sdpa(q, k, v, **keywords)``.

    ``dropout`` is ``(probability, seed, offset)`` (Philox) or ``(mask, scale)``.
    """

    dropout: (
        tuple[float, TensorAttributes, TensorAttributes]
        | tuple[TensorAttributes, TensorAttributes]
        | None
    )
    generate_stats: bool | None
    is_inference: bool | None


class SdpaBackwardKeywords(_SdpaCommonKeywords, total=False):
    """The keywords of ``Graph.sdpa_backward(q, k, v, o, dO, stats, **keywords)``.

    ``dropout`` is ``(probability, seed, offset)`` (Philox) or ``(mask, scale, scale_inv)``.
    """

    dropout: (
        tuple[float, TensorAttributes, TensorAttributes]
        | tuple[TensorAttributes, TensorAttributes, TensorAttributes]
        | None
    )
    dBias: TensorAttributes | None
