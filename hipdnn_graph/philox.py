"""The Philox4x32-10 dropout stream of philox SDPA dropout, defined in NumPy.

A philox-dropout SDPA node (``set_dropout(p, seed, offset)``) keeps or drops each element
``(b, h, i, j)`` of its ``[B, H, Sq, Skv]`` attention-probability matrix from one counter-based
random stream. This module is that stream's definition; every engine that claims to run philox
dropout "on the documented stream" must give the same keep mask bit for bit.

The stream (it is the one of CUDA's memory-efficient SDPA kernel, measured on an H200, and of
``torch.ops.aten._fill_mem_eff_dropout_mask_``):

1. ``seed`` and ``offset`` are 64-bit integers, read as unsigned (an ``int64`` tensor holding
   ``-1`` means ``2**64 - 1``).
2. Element ``(b, h, i, j)`` takes stream position ``L = offset + ((b·H + h)·Sq + i)·Skv + j``
   (an exact integer: row-major order of the whole matrix, shifted by ``offset``).
3. Position ``L`` is output word ``L mod 4`` of the Philox4x32-10 block ``philox(ctr, key)`` with
   the 128-bit counter ``ctr = L // 4`` (words 0 and 1: its low and high 32 bits; words 2 and 3:
   zero) and the key ``(seed mod 2**32, seed // 2**32)``.
4. The 32-bit word ``x`` becomes the uniform ``u = fl32(fl32(x)·2**-32 + 2**-33)``, every step in
   float32 with round-to-nearest-even (curand's ``curand_uniform``); ``u`` lies in ``(0, 1]``.
5. The element is kept iff ``u > fl32(p)``; kept probabilities are multiplied by ``1 / (1 − p)``.

Philox4x32-10 is Salmon et al.'s counter-based generator ("Parallel random numbers: as easy as
1, 2, 3", SC 2011), as curand implements it: ten rounds of
``(c0, c1, c2, c3) ← (hi(M1·c2) ⊕ c1 ⊕ k0, lo(M1·c2), hi(M0·c0) ⊕ c3 ⊕ k1, lo(M0·c0))`` with
``M0 = 0xD2511F53`` and ``M1 = 0xCD9E8D57``, the key bumped by ``(0x9E3779B9, 0xBB67AE85)``
(mod ``2**32``) after each round.

Everything here is vectorized over uint32/uint64 arrays, and works on bounded chunks, so the
only large array is the result (and :func:`dropout_uniforms` can return any rectangular block of
rows and columns, for a tiled consumer).

Example:
    >>> from hipdnn_graph.philox import dropout_keep_mask, dropout_uniforms
    >>> u = dropout_uniforms(seed=42, offset=0, shape=(1, 1, 5, 7))
    >>> u.dtype.name, u.shape, float(u[0, 0, 0, 0])
    ('float32', (1, 1, 5, 7), 0.6129598617553711)
    >>> dropout_keep_mask(42, 0, 0.5, (1, 1, 5, 7))[0, 0, 0, :4].tolist()
    [True, False, False, False]
    >>> bool((dropout_uniforms(42, 1, (1, 1, 5, 7)).ravel()[:-1]
    ...       == u.ravel()[1:]).all())  # offset 1 shifts the stream by one element
    True
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, SupportsIndex

import numpy as np
import numpy.typing as npt

from .errors import HipdnnError
from .types import ErrorCode

__all__ = [
    "PHILOX_M0",
    "PHILOX_M1",
    "PHILOX_ROUNDS",
    "PHILOX_W0",
    "PHILOX_W1",
    "dropout_keep_mask",
    "dropout_keep_words",
    "dropout_scale",
    "dropout_threshold",
    "dropout_uniforms",
    "philox4x32_10",
    "uniform_from_bits",
]

#: Philox4x32 round multipliers (word 0 and word 2)
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
#: Weyl key increments added to key words 0 and 1 after each round
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
#: rounds of Philox4x32-10
PHILOX_ROUNDS = 10

_MASK32 = 0xFFFFFFFF
_U64 = 1 << 64
#: a chunk holds at most this many Philox blocks (4 words each): bounds the temporaries
_CHUNK_BLOCKS = 1 << 16

U32Array = npt.NDArray[np.uint32]


def philox4x32_10(
    counter: Sequence[npt.ArrayLike], key: tuple[int, int]
) -> tuple[U32Array, U32Array, U32Array, U32Array]:
    """Philox4x32-10 of each 128-bit counter under one 64-bit key, elementwise.

    Args:
        counter: The four 32-bit counter words ``(c0, c1, c2, c3)``, least significant first;
            arrays (or ints) that broadcast together, with values in ``[0, 2**32)``.
        key: The two 32-bit key words ``(k0, k1)``.

    Returns:
        The four output words, uint32 arrays of the broadcast shape.

    Raises:
        HipdnnError: ``INVALID_VALUE`` if there are not four counter words or a key word is not
            in ``[0, 2**32)``.

    Example:
        >>> from hipdnn_graph.philox import philox4x32_10
        >>> [hex(int(w)) for w in philox4x32_10((0, 0, 0, 0), (0, 0))]  # Random123 known answer
        ['0x6627e8d5', '0xe169c58d', '0xbc57ac4c', '0x9b00dbd8']
    """
    if len(counter) != 4:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"philox4x32_10: counter needs 4 words, got {len(counter)}"
        )
    for word in key:
        if not 0 <= int(word) <= _MASK32:
            raise HipdnnError(
                ErrorCode.INVALID_VALUE, f"philox4x32_10: key word {word} is not in [0, 2**32)"
            )
    words = np.broadcast_arrays(*(np.asarray(c, dtype=np.uint64) for c in counter))
    c0, c1, c2, c3 = (w.astype(np.uint64) for w in words)
    k0, k1 = int(key[0]), int(key[1])
    m0, m1, low = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1), np.uint64(_MASK32)
    shift = np.uint64(32)
    for _ in range(PHILOX_ROUNDS):
        p0 = c0 * m0  # < 2**64: exact in uint64
        p1 = c2 * m1
        c0, c1, c2, c3 = (
            (p1 >> shift) ^ c1 ^ np.uint64(k0),
            p1 & low,
            (p0 >> shift) ^ c3 ^ np.uint64(k1),
            p0 & low,
        )
        k0 = (k0 + PHILOX_W0) & _MASK32
        k1 = (k1 + PHILOX_W1) & _MASK32
    return (
        c0.astype(np.uint32),
        c1.astype(np.uint32),
        c2.astype(np.uint32),
        c3.astype(np.uint32),
    )


def uniform_from_bits(bits: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """curand's uniform of 32 random bits: ``fl32(fl32(x)·2**-32 + 2**-33)``, in ``(0, 1]``.

    Args:
        bits: uint32 words.

    Returns:
        float32 uniforms, one per word.

    Example:
        >>> from hipdnn_graph.philox import uniform_from_bits
        >>> uniform_from_bits([0, 2**31, 2**32 - 1]).tolist()
        [1.1641532182693481e-10, 0.5, 1.0]
    """
    x = np.asarray(bits, dtype=np.uint32).astype(np.float32)
    return x * np.float32(2.0**-32) + np.float32(2.0**-33)


def dropout_threshold(p: float) -> np.float32:
    """The float32 threshold of the keep rule ``u > fl32(p)``.

    Raises:
        HipdnnError: ``INVALID_VALUE`` unless ``0 <= p < 1``.

    Example:
        >>> from hipdnn_graph.philox import dropout_threshold
        >>> float(dropout_threshold(0.1))
        0.10000000149011612
    """
    if not 0.0 <= float(p) < 1.0:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"philox dropout: probability must be in [0, 1), got {p}"
        )
    return np.float32(p)


def dropout_keep_words(p: float) -> int:
    """The smallest 32-bit word whose uniform is kept: ``u(x) > fl32(p)`` iff ``x >= this``.

    :func:`uniform_from_bits` never decreases as ``x`` grows, so the keep rule is one integer
    comparison of the raw Philox word; this lets an engine skip the float conversion (the torch
    math engine does). ``2**32`` means that no word is kept.

    Raises:
        HipdnnError: ``INVALID_VALUE`` unless ``0 <= p < 1``.

    Example:
        >>> from hipdnn_graph.philox import dropout_keep_words, uniform_from_bits
        >>> t = dropout_keep_words(0.5)
        >>> t, float(uniform_from_bits(t - 1)[()]), float(uniform_from_bits(t)[()])
        (2147483777, 0.5, 0.5000000596046448)
    """
    threshold = dropout_threshold(p)
    lo, hi = 0, 1 << 32  # invariant: u(lo - 1) <= threshold (or lo == 0), u(hi) > threshold
    while lo < hi:
        mid = (lo + hi) // 2
        if uniform_from_bits(np.uint32(mid))[()] > threshold:
            hi = mid
        else:
            lo = mid + 1
    return lo


def dropout_scale(p: float) -> float:
    """The factor ``1 / (1 − p)`` that kept probabilities are multiplied by (float64).

    Raises:
        HipdnnError: ``INVALID_VALUE`` unless ``0 <= p < 1``.

    Example:
        >>> from hipdnn_graph.philox import dropout_scale
        >>> dropout_scale(0.5)
        2.0
    """
    dropout_threshold(p)
    return 1.0 / (1.0 - float(p))


def _u64(value: Any, what: str) -> int:
    """A seed or offset as an unsigned 64-bit integer (int64 values wrap, as in C)."""
    try:
        v = operator.index(value)
    except TypeError:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE, f"philox dropout: {what} must be an integer, got {value!r}"
        ) from None
    if not -(1 << 63) <= v < _U64:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"philox dropout: {what} {v} does not fit in 64 bits",
        )
    return v % _U64


def _shape4(shape: Sequence[SupportsIndex]) -> tuple[int, int, int, int]:
    dims = tuple(operator.index(d) for d in shape)
    if len(dims) != 4 or any(d < 0 for d in dims):
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"philox dropout: shape must be [B, H, Sq, Skv] of sizes >= 0, got {list(dims)}",
        )
    return dims[0], dims[1], dims[2], dims[3]


def _span(span: tuple[int, int] | None, size: int, what: str) -> tuple[int, int]:
    if span is None:
        return 0, size
    start, stop = (operator.index(s) for s in span)
    if not 0 <= start <= stop <= size:
        raise HipdnnError(
            ErrorCode.INVALID_VALUE,
            f"philox dropout: {what} ({start}, {stop}) is not within [0, {size}]",
        )
    return start, stop


def _fill_rows(
    out: npt.NDArray[Any],
    base: npt.NDArray[np.uint64],
    seed: int,
    offset: int,
    convert: Callable[[U32Array], npt.NDArray[Any]],
) -> None:
    """Fill ``out[r, t]`` with ``convert`` of the word at stream position
    ``offset + base[r] + t``.

    The positions of one row are consecutive, so a row of ``n`` elements needs at most
    ``n // 4 + 2`` Philox blocks; rows and columns are processed in chunks of at most
    ``_CHUNK_BLOCKS`` blocks, which bounds every temporary.
    """
    rows, n = out.shape
    if rows == 0 or n == 0:
        return
    key = (seed & _MASK32, seed >> 32)
    off_block = np.uint64(offset >> 2)  # < 2**62
    off_lane = np.uint64(offset & 3)
    col_step = max(4, (_CHUNK_BLOCKS - 2) * 4)
    for c0 in range(0, n, col_step):
        width = min(col_step, n - c0)
        nblocks = (width + 3) // 4 + 1  # a row starting at lane 3 spans one more block
        row_step = max(1, _CHUNK_BLOCKS // nblocks)
        for r0 in range(0, rows, row_step):
            r1 = min(rows, r0 + row_step)
            # position within the stream, relative to 4·(offset // 4): < 2**63 + 3, no overflow
            rel = base[r0:r1] + np.uint64(c0) + off_lane
            first = off_block + (rel >> np.uint64(2))  # the row's first block (< 2**63)
            lane = (rel & np.uint64(3)).astype(np.intp)
            ctr = first[:, None] + np.arange(nblocks, dtype=np.uint64)[None, :]
            words = philox4x32_10(
                (ctr & np.uint64(_MASK32), ctr >> np.uint64(32), 0, 0),
                key,
            )
            flat = np.stack(words, axis=-1).reshape(r1 - r0, 4 * nblocks)
            cols = lane[:, None] + np.arange(width, dtype=np.intp)[None, :]
            out[r0:r1, c0 : c0 + width] = convert(np.take_along_axis(flat, cols, 1))


def _draw(
    seed: SupportsIndex,
    offset: SupportsIndex,
    shape: Sequence[SupportsIndex],
    spans: tuple[tuple[int, int] | None, ...],
    dtype: type[Any],
    convert: Callable[[U32Array], npt.NDArray[Any]],
) -> npt.NDArray[Any]:
    """``convert`` of the words of the block ``spans`` (batches, heads, rows, cols)."""
    s = _u64(seed, "seed")
    off = _u64(offset, "offset")
    dims = _shape4(shape)
    (b0, b1), (h0, h1), (r0, r1), (c0, c1) = (
        _span(span, size, what)
        for span, size, what in zip(spans, dims, ("batches", "heads", "rows", "cols"), strict=True)
    )
    _, h, sq, skv = dims
    out = np.empty((b1 - b0, h1 - h0, r1 - r0, c1 - c0), dtype=dtype)
    if out.size == 0:
        return out
    # each returned row starts at position ((b·H + h)·Sq + i)·Skv + c0 (uint64, exact)
    bh = np.arange(b0, b1, dtype=np.uint64)[:, None] * np.uint64(h)
    bh = (bh + np.arange(h0, h1, dtype=np.uint64)[None, :]).reshape(-1, 1) * np.uint64(sq)
    row = bh + np.arange(r0, r1, dtype=np.uint64)[None, :]
    base = (row * np.uint64(skv) + np.uint64(c0)).reshape(-1)
    _fill_rows(out.reshape(-1, c1 - c0), base, s, off, convert)
    return out


def dropout_uniforms(
    seed: SupportsIndex,
    offset: SupportsIndex,
    shape: Sequence[SupportsIndex],
    *,
    rows: tuple[int, int] | None = None,
    cols: tuple[int, int] | None = None,
    batches: tuple[int, int] | None = None,
    heads: tuple[int, int] | None = None,
) -> npt.NDArray[np.float32]:
    """The stream's uniforms for a ``[B, H, Sq, Skv]`` attention matrix (or a block of it).

    Element ``(b, h, i, j)`` gets the uniform at stream position
    ``offset + ((b·H + h)·Sq + i)·Skv + j`` (see the module docstring for the whole definition).

    Args:
        seed: The 64-bit Philox key (an int64 value is read as unsigned).
        offset: The 64-bit stream offset (read as unsigned).
        shape: ``[B, H, Sq, Skv]`` of the whole attention matrix; positions follow from it.
        rows: ``(start, stop)`` of the query rows to return; all of them by default.
        cols: ``(start, stop)`` of the key columns to return; all of them by default.
        batches: ``(start, stop)`` of the batch elements to return; all by default.
        heads: ``(start, stop)`` of the heads to return; all by default.

    Returns:
        float32 uniforms in ``(0, 1]``, ``[B, H, Sq, Skv]`` or the requested block of it.

    Raises:
        HipdnnError: ``INVALID_VALUE`` for a seed or offset that is not a 64-bit integer, a
            shape that is not four non-negative sizes, or a span outside the shape.

    Example:
        >>> from hipdnn_graph.philox import dropout_uniforms
        >>> full = dropout_uniforms(7, 12, (3, 1, 17, 24))
        >>> block = dropout_uniforms(7, 12, (3, 1, 17, 24), rows=(4, 9), cols=(3, 20))
        >>> bool((block == full[:, :, 4:9, 3:20]).all())
        True
    """
    spans = (batches, heads, rows, cols)
    return _draw(seed, offset, shape, spans, np.float32, uniform_from_bits)


def dropout_keep_mask(
    seed: SupportsIndex,
    offset: SupportsIndex,
    p: float,
    shape: Sequence[SupportsIndex],
    *,
    rows: tuple[int, int] | None = None,
    cols: tuple[int, int] | None = None,
    batches: tuple[int, int] | None = None,
    heads: tuple[int, int] | None = None,
) -> npt.NDArray[np.bool_]:
    """The keep mask ``u > fl32(p)`` of :func:`dropout_uniforms` (True: kept).

    Args:
        seed: The 64-bit Philox key (an int64 value is read as unsigned).
        offset: The 64-bit stream offset (read as unsigned).
        p: The dropout probability, in ``[0, 1)``.
        shape: ``[B, H, Sq, Skv]`` of the whole attention matrix.
        rows, cols, batches, heads: The block to return, as in :func:`dropout_uniforms`.

    Returns:
        bool ``[B, H, Sq, Skv]`` or the requested block of it; no float array is made (the
        rule is applied to the raw words, :func:`dropout_keep_words`).

    Raises:
        HipdnnError: ``INVALID_VALUE`` for ``p`` outside ``[0, 1)`` and as
            :func:`dropout_uniforms`.

    Example:
        >>> from hipdnn_graph.philox import dropout_keep_mask
        >>> m = dropout_keep_mask(2**40 + 7, 4096, 0.1, (1, 2, 64, 64))
        >>> m.shape, round(float(m.mean()), 2)
        ((1, 2, 64, 64), 0.9)
    """
    words = np.uint64(dropout_keep_words(p))

    def keep(x: U32Array) -> npt.NDArray[np.bool_]:
        return x >= words

    return _draw(seed, offset, shape, (batches, heads, rows, cols), np.bool_, keep)
