"""Padding block masks for FlexAttention, computed from the lengths without a dense mask or a sort.

A leaf of the flex kernel (:mod:`.flex`). ``create_block_mask`` evaluates the mask modifier on
every (query, key) pair and orders each row's blocks with an ``argsort``; compiled, that sort
took 47 s to build at S = 4k (and about 160 s at 16k) on the H200's host, and uncompiled the call
costs milliseconds. A padding plan builds its block mask on every call (the lengths are runtime
tensors), so this module computes the same block mask in closed form instead: a handful of
pointwise operations on ``[B, blocks, blocks]`` integers.

The masks the flex engine expresses are intervals: key ``j`` is visible to query ``i`` iff
``i < Lq``, ``j < Lk`` and ``i + off − left ≤ j ≤ i + off + right`` (each bound only if set;
:mod:`._flex_mods`). For one row of query blocks the visible keys form one contiguous range of key
blocks, and the fully visible ones a contiguous range inside it; the partially visible ones are
what lies on either side. Columns are the same problem transposed (queries of a key:
``j − off − right ≤ i ≤ j − off + left``). Each row's block indices come out in
``create_block_mask``'s order: the listed blocks ascending, then the others ascending.

Example:
    >>> import torch
    >>> from ._flex_mods import Features
    >>> f = Features(sq=512, skv=512, padding=True)
    >>> parts = padding_blocks(f, torch.tensor([300]), torch.tensor([512]))
    >>> parts[0].tolist(), parts[2].tolist()  # per query block: partial, full key blocks
    ([[[0, 0, 4, 0]]], [[[4, 4, 0, 0]]])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ._flex_mods import Features

Tensor = torch.Tensor

#: FlexAttention's default sparse block size (rows and columns)
BLOCK = 128


def padding_blocks(
    f: Features, len_q: Tensor, len_kv: Tensor, block: int = BLOCK
) -> tuple[Tensor, ...]:
    """The eight tensors of a block mask, as ``BlockMask``'s constructor takes them: partial and
    full key blocks per query block, then partial and full query blocks per key block (each a
    count ``[B,1,n]`` and indices ``[B,1,n,m]``, int32). ``len_q``/``len_kv`` are ``[B]``
    lengths already clipped to ``[0, Sq]``/``[0, Skv]``."""
    lq, lk = len_q.long().view(-1, 1), len_kv.long().view(-1, 1)
    off = lk - lq if f.bottom_right else torch.zeros_like(lq)
    nq, nk = -(-f.sq // block), -(-f.skv // block)
    by_row = _side(lq, lk, off, f.left_bound, f.right_bound, nq, nk, block)
    by_col = _side(lk, lq, -off, f.right_bound, f.left_bound, nk, nq, block)
    return (*by_row, *by_col)


def padding_block_mask(
    f: Features, len_q: Tensor, len_kv: Tensor, mask_mod: Any, block: int = BLOCK
) -> Any:
    """A ``BlockMask`` of :func:`padding_blocks` (equal to ``create_block_mask`` of ``mask_mod``
    with batch ``B`` and one head)."""
    return as_block_mask(f.sq, f.skv, padding_blocks(f, len_q, len_kv, block), mask_mod, block)


#: ``BlockMask``'s tensors in the order :func:`padding_blocks` returns them
FIELDS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
          "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices")  # fmt: skip


def as_block_mask(
    sq: int, skv: int, parts: Sequence[Tensor], mask_mod: Any, block: int = BLOCK
) -> Any:
    """The ``BlockMask`` of ``parts`` (:data:`FIELDS`, in that order)."""
    from torch.nn.attention.flex_attention import BlockMask

    kv_num, kv_idx, full_kv_num, full_kv_idx, q_num, q_idx, full_q_num, full_q_idx = parts
    return BlockMask(
        seq_lengths=(sq, skv),
        kv_num_blocks=kv_num,
        kv_indices=kv_idx,
        full_kv_num_blocks=full_kv_num,
        full_kv_indices=full_kv_idx,
        q_num_blocks=q_num,
        q_indices=q_idx,
        full_q_num_blocks=full_q_num,
        full_q_indices=full_q_idx,
        BLOCK_SIZE=(block, block),
        mask_mod=mask_mod,
    )


def _side(
    rows: Tensor,
    cols: Tensor,
    off: Tensor,
    left: int | None,
    right: int | None,
    n_rows: int,
    n_cols: int,
    block: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Partial and full column blocks of each row block, for ``rows``/``cols`` lengths ``[B,1]``
    and the band ``row + off − left ≤ col ≤ row + off + right``."""
    first = torch.arange(n_rows, device=rows.device).view(1, -1) * block  # [1, n_rows]
    last = torch.minimum(first + block, rows) - 1  # the block's last row inside the length

    def lo(i: Tensor) -> Tensor:  # first visible column of row i (rows with any)
        return (i + off - left).clamp_min(0) if left is not None else torch.zeros_like(i)

    def hi(i: Tensor) -> Tensor:  # last visible column of row i
        return torch.minimum(cols - 1, i + off + right) if right is not None else cols - 1 + 0 * i

    # the block's rows that see any column form one range [top, bottom]
    top = first if right is None else torch.maximum(first, -off - right)
    bottom = last if left is None else torch.minimum(last, cols - 1 - off + left)
    seen = (top <= bottom) & (cols > 0)
    if left is not None and right is not None and left + right < 0:
        seen = torch.zeros_like(seen)  # the band is empty: no row sees anything
    start = torch.where(seen, _floor(lo(top), block), 0)
    end = torch.where(seen, _floor(hi(bottom), block) + 1, 0)
    # fully visible columns: every row of the block is inside the length and sees all of them
    full_start = _floor(lo(first + block - 1) + block - 1, block)
    full_end = _floor(hi(first) + 1, block)
    full = seen & (first + block <= rows) & (full_start < full_end)
    full_start = torch.where(full, full_start, 0)
    full_end = torch.where(full, full_end, 0)
    # partial columns: the visible range without the full one (one range on either side)
    left_end = torch.where(full, full_start, end)
    right_start = torch.where(full, full_end, end)
    partial = (start, left_end, right_start, end)
    return (
        _count(partial),
        _ordered(partial, n_cols),
        _count((full_start, full_end)),
        _ordered((full_start, full_end, full_end, full_end), n_cols),
    )


def _floor(x: Tensor, block: int) -> Tensor:
    return torch.div(x, block, rounding_mode="floor")


def _count(bounds: tuple[Tensor, ...]) -> Tensor:
    pairs = zip(bounds[::2], bounds[1::2], strict=True)
    total = sum((e - s for s, e in pairs), torch.zeros_like(bounds[0]))
    return total.to(torch.int32).unsqueeze(1)


def _ordered(ranges: tuple[Tensor, Tensor, Tensor, Tensor], n: int) -> Tensor:
    """Column indices of each row: the columns in the two ranges ``[s1, e1)``, ``[s2, e2)``
    (``s1 ≤ e1 ≤ s2 ≤ e2``) ascending, then every other column ascending (what a stable
    descending ``argsort`` of the row's 0/1 flags gives)."""
    s1, e1, s2, e2 = ranges
    zero = torch.zeros_like(s1)
    segments = ((s1, e1), (s2, e2), (zero, s1), (e1, s2), (e2, zero + n))
    j = torch.arange(n, device=s1.device).view(1, 1, -1)
    out = torch.zeros(j.shape, dtype=s1.dtype, device=s1.device) + zero.unsqueeze(-1)
    before = zero.unsqueeze(-1)
    for start, end in segments:
        length = (end - start).unsqueeze(-1)
        inside = (j >= before) & (j < before + length)
        out = torch.where(inside, start.unsqueeze(-1) + j - before, out)
        before = before + length
    return out.to(torch.int32).unsqueeze(1)
