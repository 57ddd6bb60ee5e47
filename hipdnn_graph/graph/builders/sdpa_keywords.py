"""cudnn-frontend's Python keyword spellings for ``Graph.sdpa`` / ``Graph.sdpa_backward``.

Each keyword maps onto one setter of the attributes object, so the keyword style and the
attributes style build exactly the same node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...attributes.base import SdpaCommonAttributes
from ...attributes.sdpa_backward import SdpaBackwardAttributes
from ...errors import HipdnnError
from ...tensor import TensorAttributes
from ...types import ErrorCode

__all__ = ["BACKWARD_KEYWORDS", "FORWARD_KEYWORDS", "apply_keywords"]

_COMMON: dict[str, str] = {
    "name": "set_name",
    "compute_data_type": "set_compute_data_type",
    "attn_scale": "set_attn_scale",
    "bias": "set_bias",
    "use_alibi_mask": "set_alibi_mask",
    "use_padding_mask": "set_padding_mask",
    "seq_len_q": "set_seq_len_q",
    "seq_len_kv": "set_seq_len_kv",
    "use_causal_mask": "set_causal_mask",
    "use_causal_mask_bottom_right": "set_causal_mask_bottom_right",
    "diagonal_alignment": "set_diagonal_alignment",
    "diagonal_band_left_bound": "set_diagonal_band_left_bound",
    "diagonal_band_right_bound": "set_diagonal_band_right_bound",
    "sliding_window_length": "set_sliding_window_length",
    "dropout": "set_dropout",
}

#: keyword → setter of :class:`SdpaAttributes`
FORWARD_KEYWORDS: Mapping[str, str] = {
    **_COMMON,
    "generate_stats": "set_generate_stats",
    "is_inference": "set_is_inference",
}

#: keyword → setter of :class:`SdpaBackwardAttributes`
BACKWARD_KEYWORDS: Mapping[str, str] = {**_COMMON, "dBias": "set_dbias"}


def apply_keywords(
    attributes: SdpaCommonAttributes, keywords: Mapping[str, Any], table: Mapping[str, str], op: str
) -> None:
    """Apply cudnn-style keywords to ``attributes`` through their setters.

    ``dropout`` takes a tuple: ``(probability, seed, offset)`` or the mask form. ``None`` values
    are skipped, as cudnn-frontend treats them as "not given".

    Raises:
        HipdnnError: ``INVALID_VALUE`` for an unknown keyword or a malformed ``dropout`` tuple.
    """
    for key, value in keywords.items():
        setter = table.get(key)
        if setter is None:
            known = ", ".join(sorted(table))
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"{op}() got an unknown keyword '{key}'; accepted: {known}"
            )
        if value is None:
            continue
        if key == "dropout":
            _check_dropout(attributes, value, op)
            getattr(attributes, setter)(*value)
        else:
            getattr(attributes, setter)(value)


def _check_dropout(attributes: SdpaCommonAttributes, value: Any, op: str) -> None:
    """``dropout`` is ``(p, seed, offset)`` or the mask form: ``(mask, scale, scale_inv)`` for the
    backward, ``(mask, scale)`` for the forward (cudnn-frontend's tuples)."""
    backward = isinstance(attributes, SdpaBackwardAttributes)
    mask_form = "(mask, scale, scale_inv)" if backward else "(mask, scale)"
    ok = isinstance(value, tuple | list) and (
        len(value) == (3 if backward else 2)
        if value and isinstance(value[0], TensorAttributes)
        else len(value) == 3
    )
    if not ok:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"{op}(): dropout must be a tuple (probability, seed, offset) or {mask_form}",
        )
