"""What the SDPA forward and backward attributes share: the common slots, the mask flags and
bounds, the scale and the dropout probability, and the cuDNN setters hipDNN records as
unsupported.

Example:
    >>> from hipdnn_graph import SdpaAttributes
    >>> a = SdpaAttributes().set_diagonal_band_left_bound(3).set_causal_mask(True)
    >>> a.mask_window()
    MaskWindow(bottom_right=False, left_bound=3, right_bound=0)
"""

from __future__ import annotations

from numbers import Real
from typing import Annotated, Any, ClassVar, Self

from ..errors import HipdnnError
from ..tensor import TensorAttributes
from ..tensor_input import as_flag, keyword
from ..types import DiagonalAlignment, ErrorCode
from .accessors import SlotGetter, member, scalar_slot, slot
from .checks import (
    bounded_int,
    checked_attn_scale,
    checked_dropout_probability,
    enum_member,
    optional,
)
from .mask_window import MaskWindow
from .node_attributes import NodeAttributes

__all__ = ["SdpaCommonAttributes"]


def _bound(value: Any, what: str) -> int | None:
    """A diagonal-band bound: ``None``, or an integer in int64 (hipDNN's type for it)."""
    if value is None:
        return None
    message = "{what} must be a 64-bit integer (hipDNN's int64), got {number}"
    return bounded_int(value, what, 64, message)


class SdpaCommonAttributes(NodeAttributes):
    """Slots, flags and scalars shared by SDPA forward and backward attributes."""

    # Keywords get the setters' checks (bools only for flags, finite float32 scalars, ...).
    alibi_mask: Annotated[bool, keyword(as_flag, "alibi_mask")] = False
    padding_mask: Annotated[bool, keyword(as_flag, "padding_mask")] = False
    causal_mask: Annotated[bool, keyword(as_flag, "causal_mask")] = False
    causal_mask_bottom_right: Annotated[bool, keyword(as_flag, "causal_mask_bottom_right")] = False
    dropout_probability: Annotated[float | None, optional(checked_dropout_probability)] = None
    attn_scale_value: Annotated[float | None, optional(checked_attn_scale)] = None
    left_bound: Annotated[int | None, keyword(_bound, "left_bound")] = None
    right_bound: Annotated[int | None, keyword(_bound, "right_bound")] = None
    diagonal_alignment: DiagonalAlignment = DiagonalAlignment.TOP_LEFT

    # ----- input slots common to forward and backward -----
    set_q, get_q = slot("Q")
    set_k, get_k = slot("K")
    set_v, get_v = slot("V")
    get_attn_scale: ClassVar[SlotGetter] = SlotGetter("Attn_scale")
    set_bias, get_bias = slot("Bias")
    set_seq_len_q, get_seq_len_q = slot("SEQ_LEN_Q")
    set_seq_len_kv, get_seq_len_kv = slot("SEQ_LEN_KV")
    set_seed, get_seed = scalar_slot("Seed")
    set_offset, get_offset = scalar_slot("Offset")
    set_dropout_mask, get_dropout_mask = slot("Dropout_mask")
    set_dropout_scale, get_dropout_scale = scalar_slot("Dropout_scale")

    def set_attn_scale(self, scale: TensorAttributes | float | None) -> Self:
        """A scale tensor (pass-by-value scalar), or a float that sets ``attn_scale_value``."""
        if isinstance(scale, TensorAttributes) or scale is None:
            return self._set_input(self._IN["Attn_scale"], scale)
        if isinstance(scale, bool) or not isinstance(scale, Real):
            raise HipdnnError(
                ErrorCode.INVALID_VALUE,
                f"attn_scale must be a float or a TensorAttributes, got {type(scale).__name__}",
            )
        self.attn_scale_value = checked_attn_scale(scale)
        return self

    # ----- flags and scalars -----
    set_alibi_mask, get_alibi_mask = member("alibi_mask", as_flag)
    set_padding_mask, get_padding_mask = member("padding_mask", as_flag)
    set_causal_mask, get_causal_mask = member(
        "causal_mask",
        as_flag,
        doc="Causal mask aligned top-left (key ``j`` visible to query ``i`` iff ``j <= i``).",
    )
    set_causal_mask_bottom_right, get_causal_mask_bottom_right = member(
        "causal_mask_bottom_right",
        as_flag,
        doc="Causal mask aligned bottom-right (``j <= i + seq_kv - seq_q``).",
    )
    set_diagonal_band_left_bound, get_diagonal_band_left_bound = member(
        "left_bound",
        _bound,
        "diagonal_band_left_bound",
        doc="Hide keys ``j < i + offset - value`` (``None``: no left bound); any int64.",
    )
    set_diagonal_band_right_bound, get_diagonal_band_right_bound = member(
        "right_bound",
        _bound,
        "diagonal_band_right_bound",
        doc="Hide keys ``j > i + offset + value`` (``None``: no right bound); any int64.",
    )

    def set_sliding_window_length(self, value: int) -> Self:
        """cuDNN spelling: sets the left diagonal-band bound."""
        return self.set_diagonal_band_left_bound(value)

    def set_diagonal_alignment(self, value: DiagonalAlignment | int) -> Self:
        self.diagonal_alignment = enum_member(DiagonalAlignment, value, "diagonal alignment")
        return self

    def get_dropout_probability(self) -> float | None:
        return self.dropout_probability

    def get_attn_scale_value(self) -> float | None:
        return self.attn_scale_value

    def get_diagonal_alignment(self) -> DiagonalAlignment:
        return self.diagonal_alignment

    def _set_dropout_probability(
        self,
        probability: float,
        seed: TensorAttributes | float | None,
        offset: TensorAttributes | float | None,
    ) -> Self:
        self.dropout_probability = checked_dropout_probability(probability)
        self._set_input(self._IN["Seed"], seed)
        return self._set_input(self._IN["Offset"], offset)

    # ----- cuDNN setters hipDNN records as unsupported (first reason wins) -----
    def set_score_mod(self, value: Any) -> Self:
        return self._record_unsupported("SDPA score modifier is unsupported by hipDNN")

    def set_max_total_seq_len_q(self, value: int) -> Self:
        return self._record_unsupported("SDPA max_total_seq_len_q is unsupported by hipDNN")

    def set_max_total_seq_len_kv(self, value: int) -> Self:
        return self._record_unsupported("SDPA max_total_seq_len_kv is unsupported by hipDNN")

    def mask_window(self) -> MaskWindow:
        """The effective window these flags describe, for engines.

        ``causal_mask`` is top-left with right bound 0, ``causal_mask_bottom_right`` is
        bottom-right with right bound 0; an explicit right bound tightens (never widens) a causal
        one. Alignment is bottom-right when ``causal_mask_bottom_right`` is set, or when
        ``diagonal_alignment`` is BOTTOM_RIGHT and the top-left ``causal_mask`` is not.

        Example:
            >>> from hipdnn_graph import SdpaBackwardAttributes
            >>> SdpaBackwardAttributes().set_causal_mask_bottom_right(True).mask_window()
            MaskWindow(bottom_right=True, left_bound=None, right_bound=0)
        """
        causal = self.causal_mask or self.causal_mask_bottom_right
        right = self.right_bound
        if causal:
            right = 0 if right is None else min(right, 0)
        bottom_right = self.causal_mask_bottom_right or (
            self.diagonal_alignment == DiagonalAlignment.BOTTOM_RIGHT and not self.causal_mask
        )
        return MaskWindow(bottom_right=bottom_right, left_bound=self.left_bound, right_bound=right)
