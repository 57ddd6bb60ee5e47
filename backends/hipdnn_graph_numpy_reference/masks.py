"""Visibility of keys to queries in SDPA: diagonal band, alignment and padding.

Key ``j`` is visible to query ``i`` (both zero-based, in one batch element) iff

* ``i < seq_len_q`` and ``j < seq_len_kv`` (padding; without padding these are ``Sq`` / ``Skv``),
* ``right_bound is None or j <= i + offset + right_bound``,
* ``left_bound is None or j >= i + offset - left_bound``,

where ``offset`` is 0 for TOP_LEFT alignment and ``seq_len_kv - seq_len_q`` for BOTTOM_RIGHT.
A causal mask is ``right_bound=0``; a sliding window of length ``n`` is ``left_bound=n``.

Both ends of the visible interval are non-decreasing in ``i``, so the visible keys of a row are
one contiguous interval ``[lo(i), hi(i))`` and the visible keys of a block of rows lie in
``[lo(first row), hi(last row))``. :class:`KeyBand` exposes exactly these quantities, which is
what lets the tiled math skip fully masked work and mask only the edges of a tile.

Example:
    >>> band = KeyBand(seq_q=4, seq_kv=6, offset=2, left_bound=None, right_bound=0)
    >>> [band.row_interval(i) for i in range(4)]
    [(0, 3), (0, 4), (0, 5), (0, 6)]
    >>> band.visible().astype(int)[0]
    array([1, 1, 1, 0, 0, 0])
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["KeyBand", "QueryBlock", "band_for_batch", "padding_lengths", "visibility"]


@dataclass(frozen=True)
class QueryBlock:
    """Query rows ``[i0, i1)`` and the key columns ``[c0, c1)`` that any of them can see.

    Inside the block only the edges need elementwise masking: ``left`` (``[rows, width]``) covers
    columns ``[c0, c0 + width)`` and ``right`` covers ``[c1 − width, c1)``; True marks an
    invisible (row, key). None: that edge is visible to every row of the block.
    """

    i0: int
    i1: int
    c0: int
    c1: int
    left: npt.NDArray[np.bool_] | None
    right: npt.NDArray[np.bool_] | None

    def split(self, width: int) -> Iterator[QueryBlock]:
        """The same rows over consecutive column chunks of at most ``width`` keys.

        Example:
            >>> band = KeyBand(seq_q=4, seq_kv=4, offset=0, left_bound=None, right_bound=0)
            >>> blk = next(band.blocks(4))
            >>> [(c.c0, c.c1, c.right.shape) for c in blk.split(3)]
            [(0, 3, (4, 2)), (3, 4, (4, 1))]
        """
        for a in range(self.c0, self.c1, width):
            b = min(a + width, self.c1)
            left = right = None
            if self.left is not None and a < self.c0 + self.left.shape[1]:
                left = self.left[:, a - self.c0 : b - self.c0]
            if self.right is not None:
                start = self.c1 - self.right.shape[1]  # first column the right mask covers
                if b > start:
                    right = self.right[:, max(a, start) - start : b - start]
            yield QueryBlock(self.i0, self.i1, a, b, left, right)


@dataclass(frozen=True)
class KeyBand:
    """The visible key interval of every query row of one batch element.

    Attributes:
        seq_q: Number of valid query rows (rows at or past it see nothing).
        seq_kv: Number of valid key columns (columns at or past it are invisible).
        offset: Diagonal offset: 0 (TOP_LEFT) or ``seq_kv - seq_q`` (BOTTOM_RIGHT).
        left_bound: Keys before ``i + offset - left_bound`` are invisible; None: no limit.
        right_bound: Keys after ``i + offset + right_bound`` are invisible; None: no limit.
    """

    seq_q: int
    seq_kv: int
    offset: int
    left_bound: int | None
    right_bound: int | None

    def lo(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """First visible key of each row (clipped to ``[0, seq_kv]``)."""
        if self.left_bound is None:
            return np.zeros_like(rows)
        return np.clip(rows + (self.offset - self.left_bound), 0, self.seq_kv)

    def hi(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """One past the last visible key of each row (clipped to ``[0, seq_kv]``)."""
        if self.right_bound is None:
            return np.full_like(rows, self.seq_kv)
        return np.clip(rows + (self.offset + self.right_bound + 1), 0, self.seq_kv)

    def row_interval(self, i: int) -> tuple[int, int]:
        """``(lo, hi)`` of row ``i``: its visible keys are ``lo <= j < hi`` (empty if lo >= hi)."""
        r = np.array([i], dtype=np.int64)
        return int(self.lo(r)[0]), int(self.hi(r)[0])

    def nonempty_rows(self) -> tuple[int, int]:
        """The interval ``[r0, r1)`` of query rows that see at least one key (may be empty)."""
        rows = np.arange(self.seq_q, dtype=np.int64)
        nonempty = np.flatnonzero(self.lo(rows) < self.hi(rows))
        if nonempty.size == 0:
            return 0, 0
        return int(nonempty[0]), int(nonempty[-1]) + 1

    def mean_width(self) -> float:
        """Average number of visible keys of the rows that see any (0 if none do)."""
        r0, r1 = self.nonempty_rows()
        rows = np.arange(r0, r1, dtype=np.int64)
        return float(np.mean(self.hi(rows) - self.lo(rows))) if r1 > r0 else 0.0

    def blocks(self, block_q: int) -> Iterator[QueryBlock]:
        """Blocks of ``block_q`` rows covering exactly the rows that see a key.

        Example:
            >>> band = KeyBand(seq_q=4, seq_kv=4, offset=0, left_bound=None, right_bound=0)
            >>> [(b.i0, b.i1, b.c0, b.c1) for b in band.blocks(2)]
            [(0, 2, 0, 2), (2, 4, 0, 4)]
            >>> next(band.blocks(2)).right.astype(int).tolist()
            [[1], [0]]
        """
        r0, r1 = self.nonempty_rows()
        for i0 in range(r0, r1, block_q):
            i1 = min(i0 + block_q, r1)
            rows = np.arange(i0, i1, dtype=np.int64)
            lo, hi = self.lo(rows), self.hi(rows)
            c0, c1 = int(lo[0]), int(hi[-1])
            left = right = None
            if lo[-1] > c0:  # the rows' first keys differ: mask j < lo(i)
                left = np.arange(c0, int(lo[-1]))[None, :] < lo[:, None]
            if hi[0] < c1:  # the rows' last keys differ: mask j >= hi(i)
                right = np.arange(int(hi[0]), c1)[None, :] >= hi[:, None]
            yield QueryBlock(i0, i1, c0, c1, left, right)

    def visible(self, total_q: int | None = None, total_kv: int | None = None) -> npt.NDArray[Any]:
        """The full boolean visibility matrix ``[total_q, total_kv]`` (default: the valid sizes)."""
        total_q = self.seq_q if total_q is None else total_q
        total_kv = self.seq_kv if total_kv is None else total_kv
        rows = np.arange(total_q, dtype=np.int64)
        cols = np.arange(total_kv, dtype=np.int64)[None, :]
        vis = (cols >= self.lo(rows)[:, None]) & (cols < self.hi(rows)[:, None])
        vis[self.seq_q :] = False
        return vis


def padding_lengths(seq_len: Any, batch: int, full: int) -> npt.NDArray[np.int64]:
    """Per-batch valid lengths: ``seq_len`` flattened to ``batch`` ints, clipped to ``[0, full]``.

    Args:
        seq_len: None (no padding) or an integer array with ``batch`` elements, any shape.
        batch: The batch size B.
        full: The unpadded sequence length.

    Raises:
        ValueError: ``seq_len`` does not have ``batch`` elements.
    """
    if seq_len is None:
        return np.full(batch, full, dtype=np.int64)
    lengths = np.asarray(seq_len).reshape(-1)
    if lengths.size != batch:
        raise ValueError(f"sequence lengths need {batch} elements, got shape {np.shape(seq_len)}")
    return np.clip(lengths.astype(np.int64), 0, full)


def band_for_batch(
    seq_q: int,
    seq_kv: int,
    *,
    bottom_right: bool,
    left_bound: int | None,
    right_bound: int | None,
) -> KeyBand:
    """The :class:`KeyBand` of a batch element with ``seq_q`` valid rows and ``seq_kv`` keys."""
    offset = seq_kv - seq_q if bottom_right else 0
    return KeyBand(seq_q, seq_kv, offset, left_bound, right_bound)


def visibility(
    lens_q: npt.NDArray[np.int64],
    lens_kv: npt.NDArray[np.int64],
    seq_q: int,
    seq_kv: int,
    *,
    bottom_right: bool,
    left_bound: int | None,
    right_bound: int | None,
) -> npt.NDArray[np.bool_]:
    """The boolean visibility ``[B, 1, seq_q, seq_kv]`` of every batch element at once.

    ``lens_q``/``lens_kv`` hold the B valid lengths (``seq_q``/``seq_kv`` where unpadded). This
    is the module's definition written out with broadcasting, for problems small enough to mask
    whole: the tiled path uses :class:`KeyBand` instead.

    Example:
        >>> vis = visibility(np.array([2]), np.array([3]), 3, 4, bottom_right=True,
        ...                  left_bound=None, right_bound=0)
        >>> vis[0, 0].astype(int).tolist()
        [[1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]]
    """
    lq = lens_q.reshape(-1, 1, 1, 1)
    lkv = lens_kv.reshape(-1, 1, 1, 1)
    i = np.arange(seq_q, dtype=np.int64)[:, None]
    j = np.arange(seq_kv, dtype=np.int64)[None, :]
    vis: npt.NDArray[np.bool_] = (i < lq) & (j < lkv)
    offset = lkv - lq if bottom_right else 0
    if right_bound is not None:
        vis &= j <= i + offset + right_bound
    if left_bound is not None:
        vis &= j >= i + offset - left_bound
    return vis
