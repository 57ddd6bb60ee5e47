"""The effective attention window of an SDPA node, as engines read it from its mask flags."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["MaskWindow"]


class MaskWindow(BaseModel):
    """The effective attention window of an SDPA node, resolved from its mask flags.

    Key ``j`` is visible to query ``i`` iff ``j <= i + offset + right_bound`` (when a right bound
    is set) and ``j >= i + offset - left_bound`` (when a left bound is set), where ``offset`` is 0
    for top-left alignment and ``seq_kv - seq_q`` (per batch, with padding) for bottom-right.
    """

    model_config = ConfigDict(frozen=True)

    bottom_right: bool = False
    left_bound: int | None = None
    right_bound: int | None = None

    @property
    def is_full(self) -> bool:
        """True when no diagonal constraint applies."""
        return self.left_bound is None and self.right_bound is None

    def within(self, seq_q: int, seq_kv: int) -> MaskWindow:
        """The same window for ``seq_q`` queries and ``seq_kv`` keys, its bounds clamped to
        ``±(seq_q + seq_kv + 1)``.

        A key and a query are never more than ``seq_q + seq_kv - 1`` apart (padding included:
        the bottom-right offset lies in ``[-seq_q, seq_kv]``), so a bound past that distance hides
        every key or none, exactly as the clamped one does; engines then compute
        ``i + offset + bound`` in int64 without overflow, for any int64 bound hipDNN can hold.

        Example:
            >>> MaskWindow(left_bound=-(2**63), right_bound=2**63 - 1).within(4, 6)
            MaskWindow(bottom_right=False, left_bound=-11, right_bound=11)
        """
        span = seq_q + seq_kv + 1
        left, right = self.left_bound, self.right_bound
        if left is not None:
            left = max(-span, min(left, span))
        if right is not None:
            right = max(-span, min(right, span))
        if left == self.left_bound and right == self.right_bound:
            return self
        return MaskWindow(bottom_right=self.bottom_right, left_bound=left, right_bound=right)
