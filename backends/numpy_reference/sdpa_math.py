"""Scaled dot-product attention, forward and backward: the executable definition of the math.

Every other SDPA engine of the project is tested against these two functions, and they are
tested against a full-matrix float64 torch-autograd reference. Pure NumPy; no dependency on
``hipdnn_graph``.

Shapes: ``q [B,H,Sq,D]``, ``k [B,Hk,Skv,D]``, ``v [B,Hv,Skv,Dv]``, ``o``/``do [B,H,Sq,Dv]``,
``stats [B,H,Sq,1]``.

Math (HIPDNN_SPEC.md §6), for query head ``h`` of batch element ``b``:

* GQA/MQA: head ``h`` reads K head ``h // (H/Hk)`` and V head ``h // (H/Hv)``; ``Hk`` and
  ``Hv`` are independent. dK and dV sum over the query heads that share a K or V head.
* ``S = scale·Q·Kᵀ + bias (+ slope_h·(j − i) with ALiBi)``, ``slope_h = 2^(−8(h+1)/H)``,
  ``i``/``j`` the absolute query/key positions (whatever the diagonal alignment).
* ``bias`` has rank ≤ 4 and broadcasts NumPy-style (right-aligned) to ``[B,H,Sq,Skv]``; every
  dim must be 1 or the full size. ``dbias`` is ``dS`` summed down to ``dbias_shape`` (default
  ``bias.shape``) with the same right-aligned rule.
* Visibility of key ``j`` to query ``i`` (see :mod:`backends.numpy_reference.masks`):
  ``offset = 0``, or with ``bottom_right`` ``Skv − Sq`` (with padding, per batch
  ``seq_len_kv[b] − seq_len_q[b]``); visible iff ``j ≤ i + offset + right_bound`` (if set) and
  ``j ≥ i + offset − left_bound`` (if set). Causal is ``right_bound=0``; callers resolve a node's
  flags into ``bottom_right``/``left_bound``/``right_bound``.
* Padding: ``seq_len_q``/``seq_len_kv`` hold B integers (any shape, flattened; values clipped to
  ``[0, Sq]``/``[0, Skv]``). Query rows ``i ≥ seq_len_q[b]`` and key columns
  ``j ≥ seq_len_kv[b]`` are invisible. A missing one of the two means "no padding on that side".
* ``Stats = log Σ_visible exp(S)`` (natural log). A row with no visible key (padded, or
  outside the band) has ``O = 0`` and ``Stats = +inf`` (FlashAttention's convention, so
  ``exp(S − Stats) = 0``), and all its gradients are exactly 0. No NaN is ever produced from
  finite inputs; a given Stats of ``−inf`` is read as ``+inf``.
* Dropout with mask ``M`` (``[B|1, H|1, Sq, Skv]``, any numeric dtype) and scale ``s``:
  ``O = (P∘M·s)·V``; Stats is that of the undropped softmax.
* Backward, from the GIVEN ``o`` and ``stats`` (the forward's normalizer is never recomputed):
  ``P = exp(S − Stats)``; ``Δ = rowsum(dO∘O)``; ``dV = (P∘M·s)ᵀ·dO``; ``dP = (dO·Vᵀ)∘M·s``;
  ``dS = P∘(dP − Δ)``; ``dQ = scale·dS·K``; ``dK = scale·dSᵀ·Q``.

Implementation decisions:

* Inputs of any float dtype (float16, ml_dtypes.bfloat16, …) and any strides are read, never
  modified, and cast to ``compute_dtype`` (float32 or float64), which is also the dtype of every
  output. With float32 everything (matmuls, exp, sums) runs in float32.
* Work is tiled over blocks of ``block_q`` query rows, so the extra memory is
  ``O(block_q × Skv)`` at most: the forward's tile holds whole rows (its max and sum are exact
  over all visible keys, no online-softmax rescaling), the backward's tiles
  ``[block_q, block_kv]`` also split the keys (it needs no row-wise reduction: Stats and Δ are
  given) and stay about :data:`TILE_BYTES`. Default blocks are 64–1024 rows (few, large BLAS
  calls: fewer thread synchronisations), inside a band at most half the mean visible width (less
  masked work on the band's edges). Small problems stack several heads of one batch element
  into one tile (stacked matmuls; the GQA sum over shared K/V heads is folded into the matmul's
  inner dimension).
* Matmuls are BLAS calls on contiguous blocks (multi-threaded by the BLAS library); the
  elementwise steps run in place on the tiles, in the compute dtype.
* For each query block only the key columns that can be visible under the band and padding are
  touched; fully masked rows and columns are skipped, and only the band's edges are masked
  elementwise (with ``−inf`` before the exponential).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> q, k, v, do = (rng.standard_normal((1, 2, 5, 4)) for _ in range(4))
    >>> o, stats = sdpa_forward(q, k, v, scale=0.5, right_bound=0)
    >>> o.shape, stats.shape, o.dtype
    ((1, 2, 5, 4), (1, 2, 5, 1), dtype('float32'))
    >>> dq, dk, dv, dbias = sdpa_backward(q, k, v, o, do, stats, scale=0.5, right_bound=0)
    >>> dq.shape, dbias is None
    ((1, 2, 5, 4), True)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .masks import KeyBand, QueryBlock, band_for_batch, padding_lengths

__all__ = ["TILE_BYTES", "alibi_slopes", "sdpa_backward", "sdpa_forward"]

Array = npt.NDArray[Any]

TILE_BYTES = 8 << 20
"""Target size in bytes of one score tile (the backward's ``[heads, block_q, block_kv]``)."""

_BLOCK_Q = (64, 1024)  # default query block: thin blocks make slow matmuls and many BLAS calls
_BAND_BLOCK_FRACTION = 2  # banded: block ≤ mean visible width / 2 (≤ ~1/4 of a tile is masked)


def alibi_slopes(num_heads: int) -> npt.NDArray[np.float64]:
    """The standard ALiBi slopes ``2^(−8(h+1)/H)`` of the ``H`` query heads.

    Example:
        >>> alibi_slopes(4).tolist()
        [0.25, 0.0625, 0.015625, 0.00390625]
    """
    return np.exp2(-8.0 * np.arange(1, num_heads + 1, dtype=np.float64) / num_heads)


# --------------------------------------------------------------------------------------------
# Problem set-up
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Groups:
    """Which K (or V) heads a chunk ``[h0, h0 + hc)`` of query heads reads.

    The chunk's query heads form ``count`` runs of ``per`` consecutive heads, run ``r`` reading
    K/V head ``start + r``; so a ``[hc, rows, x]`` array of the chunk reshapes to
    ``[count, per·rows, x]`` and one stacked matmul per K/V head does the work (and the sum).
    """

    start: int
    count: int
    per: int


def _groups(h0: int, hc: int, group: int) -> _Groups:
    if hc >= group:
        return _Groups(h0 // group, hc // group, group)
    return _Groups(h0 // group, 1, hc)


@dataclass(frozen=True)
class _Problem:
    """Inputs cast to the compute dtype plus everything derived from the keyword arguments."""

    q: Array
    k: Array
    v: Array
    scale: float
    ct: np.dtype[Any]
    bias4: Array | None
    dropout4: Array | None
    dropout_scale: float
    slopes: Array | None
    bands: list[KeyBand]
    block_q: int
    block_kv: int
    head_chunk: int

    @property
    def shape(self) -> tuple[int, int, int, int, int, int, int, int]:
        """``(B, H, Sq, D, Hk, Skv, Hv, Dv)``."""
        b, h, sq, d = self.q.shape
        return b, h, sq, d, self.k.shape[1], self.k.shape[2], self.v.shape[1], self.v.shape[3]


def _as4(x: Array) -> Array:
    return x.reshape((1,) * (4 - x.ndim) + x.shape)


def _check_broadcast(name: str, shape: tuple[int, ...], full: tuple[int, ...]) -> None:
    if len(shape) > 4 or any(
        s not in (1, f) for s, f in zip(reversed(shape), reversed(full), strict=False)
    ):
        raise ValueError(f"{name} of shape {shape} does not broadcast to {full}")


def _choose_blocks(
    heads: int,
    seq_q: int,
    seq_kv: int,
    kv_groups: tuple[int, int],
    mean_width: float,
    itemsize: int,
    block_q: int | None,
    whole_rows: bool,
) -> tuple[int, int, int]:
    """``(block_q, block_kv, head_chunk)``: tiles of about TILE_BYTES.

    The default query block is 64–1024 rows (with ``whole_rows``, the most that whole rows in the
    budget allow), and inside a band at most half the rows' mean visible width (the band's edges
    cost masked work). Heads of one batch element are stacked into one tile while
    whole rows of them fit the budget and the chunk maps onto whole groups of shared K and V
    heads (``kv_groups`` = ``(H/Hk, H/Hv)``). Keys are split into chunks of ``block_kv`` columns
    to keep tiles within budget; the forward asks for ``whole_rows`` (its softmax is exact, not
    online), the backward needs no row-wise reduction and takes any chunk.
    """
    budget = TILE_BYTES // itemsize
    cols = max(seq_kv, 1)
    if block_q is None:
        low, high = _BLOCK_Q
        block_q = min(high, budget // cols) if whole_rows else high
        if mean_width < seq_kv:
            block_q = min(block_q, int(mean_width) // _BAND_BLOCK_FRACTION)
        block_q = max(low, block_q)
    block_q = max(1, min(block_q, seq_q))
    head_chunk = 1
    for hc in range(heads, 1, -1):
        fits = hc * block_q * cols <= budget
        aligned = all(hc % g == 0 or g % hc == 0 for g in kv_groups)
        if fits and aligned and heads % hc == 0:
            head_chunk = hc
            break
    block_kv = cols if whole_rows else min(cols, max(budget // (head_chunk * block_q), 1))
    return block_q, block_kv, head_chunk


def _prepare(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    *,
    scale: float,
    bias: npt.ArrayLike | None,
    alibi: bool,
    bottom_right: bool,
    left_bound: int | None,
    right_bound: int | None,
    seq_len_q: npt.ArrayLike | None,
    seq_len_kv: npt.ArrayLike | None,
    dropout_mask: npt.ArrayLike | None,
    dropout_scale: float,
    compute_dtype: npt.DTypeLike,
    block_q: int | None,
    whole_rows: bool,
) -> _Problem:
    ct = np.dtype(compute_dtype)
    if ct not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"compute_dtype must be float32 or float64, got {ct}")
    qa, ka, va = (np.ascontiguousarray(x, dtype=ct) for x in (q, k, v))
    for name, x in (("q", qa), ("k", ka), ("v", va)):
        if x.ndim != 4:
            raise ValueError(f"{name} must be rank-4, got shape {x.shape}")
    b, h, sq, d = qa.shape
    if ka.shape[0] != b or va.shape[0] != b or ka.shape[3] != d or va.shape[2] != ka.shape[2]:
        raise ValueError(f"shapes do not fit: q {qa.shape}, k {ka.shape}, v {va.shape}")
    hk, skv, hv = ka.shape[1], ka.shape[2], va.shape[1]
    if hk < 1 or hv < 1 or h % hk or h % hv:
        raise ValueError(f"H={h} must be divisible by Hk={hk} and Hv={hv}")
    full = (b, h, sq, skv)

    bias4 = None
    if bias is not None:
        bias_arr = np.asarray(bias)
        _check_broadcast("bias", bias_arr.shape, full)
        bias4 = _as4(bias_arr.astype(ct, copy=False))

    dropout4 = None
    if dropout_mask is not None:
        mask = np.asarray(dropout_mask)
        if mask.ndim != 4 or mask.shape[2:] != (sq, skv) or mask.shape[0] not in (1, b):
            raise ValueError(f"dropout_mask of shape {mask.shape} is not [B|1, H|1, Sq, Skv]")
        if mask.shape[1] not in (1, h):
            raise ValueError(f"dropout_mask of shape {mask.shape} is not [B|1, H|1, Sq, Skv]")
        if mask.dtype.kind not in "biu" and mask.dtype != ct:
            mask = mask.astype(ct)
        dropout4 = mask

    lens_q = padding_lengths(seq_len_q, b, sq)
    lens_kv = padding_lengths(seq_len_kv, b, skv)
    bands = [
        band_for_batch(
            int(lens_q[i]),
            int(lens_kv[i]),
            bottom_right=bottom_right,
            left_bound=left_bound,
            right_bound=right_bound,
        )
        for i in range(b)
    ]
    mean_width = max((band.mean_width() for band in bands), default=0.0)
    groups = (h // hk, h // hv)
    bq, bkv, hc = _choose_blocks(h, sq, skv, groups, mean_width, ct.itemsize, block_q, whole_rows)
    return _Problem(
        q=qa,
        k=ka,
        v=va,
        scale=float(scale),
        ct=ct,
        bias4=bias4,
        dropout4=dropout4,
        dropout_scale=float(dropout_scale),
        slopes=alibi_slopes(h).astype(ct) if alibi else None,
        bands=bands,
        block_q=bq,
        block_kv=bkv,
        head_chunk=hc,
    )


# --------------------------------------------------------------------------------------------
# Tiles
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tile:
    """Query heads ``[h0, h1)`` of batch element ``b`` × a block of rows and key columns."""

    b: int
    h0: int
    h1: int
    blk: QueryBlock

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(heads, rows, cols)``."""
        return self.h1 - self.h0, self.i1 - self.i0, self.c1 - self.c0

    @property
    def i0(self) -> int:
        """First query row."""
        return self.blk.i0

    @property
    def i1(self) -> int:
        """One past the last query row."""
        return self.blk.i1

    @property
    def c0(self) -> int:
        """First key column."""
        return self.blk.c0

    @property
    def c1(self) -> int:
        """One past the last key column."""
        return self.blk.c1

    def split(self, width: int) -> Iterator[_Tile]:
        """The same heads and rows over column chunks of at most ``width`` keys."""
        for blk in self.blk.split(width):
            yield _Tile(self.b, self.h0, self.h1, blk)


def _tiles(p: _Problem) -> Iterator[_Tile]:
    """Tiles of whole visible rows; rows seeing no key, and keys no row sees, never appear."""
    heads = p.q.shape[1]
    for b, band in enumerate(p.bands):
        for blk in band.blocks(p.block_q):
            for h0 in range(0, heads, p.head_chunk):
                yield _Tile(b, h0, h0 + p.head_chunk, blk)


def _tile_view(buf: Array, t: _Tile) -> Array:
    """A contiguous ``[hc, rows, cols]`` view on the front of the flat scratch buffer ``buf``."""
    hc, rows, cols = t.shape
    return buf[: hc * rows * cols].reshape(t.shape)


def _stacked(x: Array, g: _Groups) -> Array:
    """``[hc, rows, n]`` → ``[count, per·rows, n]`` (a view when ``x`` is contiguous)."""
    return x.reshape(g.count, -1, x.shape[-1])


def _broadcast_block(x4: Array, t: _Tile) -> Array:
    """The ``[hc|1, rows|1, cols|1]`` block of a 4-D array broadcastable to ``[B,H,Sq,Skv]``."""
    nb, nh, nq, nk = x4.shape
    return x4[
        t.b if nb > 1 else 0,
        slice(t.h0, t.h1) if nh > 1 else slice(0, 1),
        slice(t.i0, t.i1) if nq > 1 else slice(0, 1),
        slice(t.c0, t.c1) if nk > 1 else slice(0, 1),
    ]


def _scaled_q(p: _Problem, t: _Tile) -> Array:
    """The tile's ``scale·Q`` block, a fresh contiguous ``[hc, rows, D]`` array."""
    qs: Array = np.multiply(p.q[t.b, t.h0 : t.h1, t.i0 : t.i1], p.ct.type(p.scale))
    return qs


def _scores(p: _Problem, t: _Tile, qs: Array, out: Array) -> None:
    """``out ← scale·Q·Kᵀ + bias + alibi`` over the tile, ``−inf`` where invisible.

    ``qs`` is the tile's ``scale·Q`` block (:func:`_scaled_q`).
    """
    g = _groups(t.h0, t.h1 - t.h0, p.q.shape[1] // p.k.shape[1])
    kb = p.k[t.b, g.start : g.start + g.count, t.c0 : t.c1]
    np.matmul(_stacked(qs, g), kb.transpose(0, 2, 1), out=_stacked(out, g))
    if p.bias4 is not None:
        np.add(out, _broadcast_block(p.bias4, t), out=out)
    if p.slopes is not None:
        cols, rows = np.arange(t.c0, t.c1), np.arange(t.i0, t.i1)
        rel = (cols[None, :] - rows[:, None]).astype(p.ct)  # rel[i, j] = j - i
        scratch = np.empty_like(rel)
        for hh in range(t.h0, t.h1):
            np.multiply(rel, p.slopes[hh], out=scratch)
            np.add(out[hh - t.h0], scratch, out=out[hh - t.h0])
    left, right = t.blk.left, t.blk.right
    if left is not None:
        np.copyto(out[:, :, : left.shape[1]], -np.inf, where=left)
    if right is not None:
        np.copyto(out[:, :, out.shape[2] - right.shape[1] :], -np.inf, where=right)


# --------------------------------------------------------------------------------------------
# Elementwise steps, in place on tiles ``[hc, rows, cols]`` (row vectors: ``[hc, rows]``)
# --------------------------------------------------------------------------------------------


def _softmax_rows(s: Array, m: Array, lsum: Array, mask: Array | None) -> None:
    """``s ← exp(s − m)∘M`` with ``m`` the row max (0 if keyless), ``lsum`` = Σ exp(s − m)."""
    np.max(s, axis=2, out=m)
    np.copyto(m, 0, where=np.isneginf(m))  # a row of -inf scores only (e.g. from the bias)
    np.subtract(s, m[:, :, None], out=s)
    np.exp(s, out=s)
    np.sum(s, axis=2, out=lsum)
    if mask is not None:
        np.multiply(s, mask, out=s)


def _probs_rows(s: Array, lse: Array) -> None:
    """``P = exp(S − Stats)``, in place."""
    np.subtract(s, lse[:, :, None], out=s)
    np.exp(s, out=s)


def _dscores_rows(dp: Array, prob: Array, delta: Array, mask: Array | None) -> None:
    """``dS = P∘(dP∘M − Δ)``, in place of ``dP`` (the dropout scale is already in ``dP``)."""
    if mask is not None:
        np.multiply(dp, mask, out=dp)
    np.subtract(dp, delta[:, :, None], out=dp)
    np.multiply(dp, prob, out=dp)


# --------------------------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------------------------


def sdpa_forward(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    *,
    scale: float,
    bias: npt.ArrayLike | None = None,
    alibi: bool = False,
    bottom_right: bool = False,
    left_bound: int | None = None,
    right_bound: int | None = None,
    seq_len_q: npt.ArrayLike | None = None,
    seq_len_kv: npt.ArrayLike | None = None,
    dropout_mask: npt.ArrayLike | None = None,
    dropout_scale: float = 1.0,
    compute_dtype: npt.DTypeLike = np.float32,
    block_q: int | None = None,
) -> tuple[Array, Array]:
    """SDPA forward: ``O = softmax(S)·V`` (with dropout ``(P∘M·s)·V``) and its log-sum-exp.

    See the module docstring for the exact semantics of every argument.

    Args:
        q: Queries ``[B,H,Sq,D]``.
        k: Keys ``[B,Hk,Skv,D]``.
        v: Values ``[B,Hv,Skv,Dv]``.
        scale: Multiplies ``Q·Kᵀ``.
        bias: Added to the scores; rank ≤ 4, broadcasts right-aligned to ``[B,H,Sq,Skv]``.
        alibi: Add the ALiBi bias ``slope_h·(j − i)``.
        bottom_right: Align the band's diagonal to the bottom-right corner.
        left_bound: Keys before ``i + offset − left_bound`` are invisible.
        right_bound: Keys after ``i + offset + right_bound`` are invisible (0: causal).
        seq_len_q: Valid query rows per batch element (B integers, any shape).
        seq_len_kv: Valid keys per batch element (B integers, any shape).
        dropout_mask: ``[B|1, H|1, Sq, Skv]`` keep-mask (any numeric dtype).
        dropout_scale: Multiplies the kept probabilities (usually ``1/(1−p)``).
        compute_dtype: float32 or float64; the dtype of the results.
        block_q: Query rows per tile (default: a tile of about :data:`TILE_BYTES`).

    Returns:
        ``(o [B,H,Sq,Dv], stats [B,H,Sq,1])``; rows with no visible key have ``o = 0`` and
        ``stats = +inf``.

    Raises:
        ValueError: Shapes that do not fit together, or an unsupported compute dtype.

    Example:
        >>> import numpy as np
        >>> q = k = v = np.ones((1, 1, 2, 2), dtype=np.float32)
        >>> o, stats = sdpa_forward(q, k, v, scale=1.0, right_bound=0)
        >>> o[0, 0].tolist(), np.exp(stats[0, 0, :, 0] - 2).round(3).tolist()
        ([[1.0, 1.0], [1.0, 1.0]], [1.0, 2.0])
    """
    p = _prepare(
        q,
        k,
        v,
        scale=scale,
        bias=bias,
        alibi=alibi,
        bottom_right=bottom_right,
        left_bound=left_bound,
        right_bound=right_bound,
        seq_len_q=seq_len_q,
        seq_len_kv=seq_len_kv,
        dropout_mask=dropout_mask,
        dropout_scale=dropout_scale,
        compute_dtype=compute_dtype,
        block_q=block_q,
        whole_rows=True,
    )
    b, h, sq, _, _, skv, hv, dv = p.shape
    o = np.zeros((b, h, sq, dv), dtype=p.ct)
    stats = np.full((b, h, sq, 1), np.inf, dtype=p.ct)
    scores = np.empty(p.head_chunk * p.block_q * skv, dtype=p.ct)
    for t in _tiles(p):
        s = _tile_view(scores, t)
        _scores(p, t, _scaled_q(p, t), s)
        m, lsum = np.empty(t.shape[:2], dtype=p.ct), np.empty(t.shape[:2], dtype=p.ct)
        mask = None if p.dropout4 is None else _broadcast_block(p.dropout4, t)
        _softmax_rows(s, m, lsum, mask)
        g = _groups(t.h0, t.h1 - t.h0, h // hv)
        pv = np.matmul(_stacked(s, g), p.v[t.b, g.start : g.start + g.count, t.c0 : t.c1])
        seen = lsum > 0
        inv = np.divide(p.dropout_scale, lsum, out=np.zeros_like(lsum), where=seen)
        o[t.b, t.h0 : t.h1, t.i0 : t.i1] = pv.reshape((*inv.shape, dv)) * inv[:, :, None]
        lse = np.log(lsum, out=np.full_like(lsum, np.inf), where=seen)
        np.add(lse, m, out=lse, where=seen)
        stats[t.b, t.h0 : t.h1, t.i0 : t.i1, 0] = lse
    return o, stats


# --------------------------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------------------------


def sdpa_backward(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    o: npt.ArrayLike,
    do: npt.ArrayLike,
    stats: npt.ArrayLike,
    *,
    scale: float,
    bias: npt.ArrayLike | None = None,
    dbias_shape: tuple[int, ...] | None = None,
    alibi: bool = False,
    bottom_right: bool = False,
    left_bound: int | None = None,
    right_bound: int | None = None,
    seq_len_q: npt.ArrayLike | None = None,
    seq_len_kv: npt.ArrayLike | None = None,
    dropout_mask: npt.ArrayLike | None = None,
    dropout_scale: float = 1.0,
    compute_dtype: npt.DTypeLike = np.float32,
    block_q: int | None = None,
) -> tuple[Array, Array, Array, Array | None]:
    """SDPA backward from the given ``o`` and ``stats``: ``(dQ, dK, dV, dBias)``.

    ``P = exp(S − Stats)``, ``Δ = rowsum(dO∘O)``, ``dV = (P∘M·s)ᵀ·dO``,
    ``dS = P∘((dO·Vᵀ)∘M·s − Δ)``, ``dQ = scale·dS·K``, ``dK = scale·dSᵀ·Q``; see the module
    docstring for the exact semantics of every argument.

    Args:
        q: Queries ``[B,H,Sq,D]``.
        k: Keys ``[B,Hk,Skv,D]``.
        v: Values ``[B,Hv,Skv,Dv]``.
        o: The forward's output ``[B,H,Sq,Dv]`` (used for ``Δ``).
        do: The gradient of the output ``[B,H,Sq,Dv]``.
        stats: The forward's log-sum-exp ``[B,H,Sq,1]`` (``+inf`` for rows seeing no key).
        scale: Multiplies ``Q·Kᵀ``.
        bias: Added to the scores; rank ≤ 4, broadcasts right-aligned to ``[B,H,Sq,Skv]``.
        dbias_shape: Shape of the returned dBias (default: ``bias.shape``); dS is summed over
            the dims where it is 1 (right-aligned). Without both bias and dbias_shape no dBias
            is computed.
        alibi: Add the ALiBi bias ``slope_h·(j − i)``.
        bottom_right: Align the band's diagonal to the bottom-right corner.
        left_bound: Keys before ``i + offset − left_bound`` are invisible.
        right_bound: Keys after ``i + offset + right_bound`` are invisible (0: causal).
        seq_len_q: Valid query rows per batch element (B integers, any shape).
        seq_len_kv: Valid keys per batch element (B integers, any shape).
        dropout_mask: ``[B|1, H|1, Sq, Skv]`` keep-mask (any numeric dtype).
        dropout_scale: Multiplies the kept probabilities (usually ``1/(1−p)``).
        compute_dtype: float32 or float64; the dtype of the results.
        block_q: Query rows per tile (default: a tile of about :data:`TILE_BYTES`).

    Returns:
        ``(dq [B,H,Sq,D], dk [B,Hk,Skv,D], dv [B,Hv,Skv,Dv], dbias or None)``, all in
        ``compute_dtype``; padded or fully masked rows and columns have exactly zero gradients.

    Raises:
        ValueError: Shapes that do not fit together, or an unsupported compute dtype.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(1)
        >>> q, k, v, do = (rng.standard_normal((2, 4, 8, 16)) for _ in range(4))
        >>> k, v = k[:, :1], v[:, :2]  # MQA keys, GQA values
        >>> bias = rng.standard_normal((8, 8))
        >>> o, lse = sdpa_forward(q, k, v, scale=0.25, bias=bias, compute_dtype=np.float64)
        >>> grads = sdpa_backward(q, k, v, o, do, lse, scale=0.25, bias=bias,
        ...                       compute_dtype=np.float64)
        >>> [g.shape for g in grads]
        [(2, 4, 8, 16), (2, 1, 8, 16), (2, 2, 8, 16), (8, 8)]
    """
    p = _prepare(
        q,
        k,
        v,
        scale=scale,
        bias=bias,
        alibi=alibi,
        bottom_right=bottom_right,
        left_bound=left_bound,
        right_bound=right_bound,
        seq_len_q=seq_len_q,
        seq_len_kv=seq_len_kv,
        dropout_mask=dropout_mask,
        dropout_scale=dropout_scale,
        compute_dtype=compute_dtype,
        block_q=block_q,
        whole_rows=False,
    )
    b, h, sq, d, hk, skv, hv, dv = p.shape
    oa, doa = (np.ascontiguousarray(x, dtype=p.ct) for x in (o, do))
    for name, x in (("o", oa), ("do", doa)):
        if x.shape != (b, h, sq, dv):
            raise ValueError(f"{name} must have shape {(b, h, sq, dv)}, got {x.shape}")
    lse = np.asarray(stats)
    if lse.size != b * h * sq:
        raise ValueError(f"stats must have shape {(b, h, sq, 1)}, got {lse.shape}")
    lse = lse.astype(p.ct).reshape(b, h, sq)  # a private copy: -inf may be rewritten below
    np.copyto(lse, np.inf, where=np.isneginf(lse))

    dq = np.zeros((b, h, sq, d), dtype=p.ct)
    dk = np.zeros((b, hk, skv, d), dtype=p.ct)
    dv_ = np.zeros((b, hv, skv, dv), dtype=p.ct)
    dbias4 = None
    if dbias_shape is None and bias is not None:
        dbias_shape = tuple(np.shape(bias))
    if dbias_shape is not None:
        _check_broadcast("dbias_shape", tuple(dbias_shape), (b, h, sq, skv))
        dbias4 = np.zeros((1,) * (4 - len(dbias_shape)) + tuple(dbias_shape), dtype=p.ct)

    tile = p.head_chunk * p.block_q * p.block_kv
    buf_p, buf_ds = np.empty(tile, dtype=p.ct), np.empty(tile, dtype=p.ct)
    scratch = np.empty(p.head_chunk * max(p.block_kv, p.block_q) * max(d, dv), dtype=p.ct)
    for rows in _tiles(p):
        hs, rs = slice(rows.h0, rows.h1), slice(rows.i0, rows.i1)
        gk = _groups(rows.h0, rows.h1 - rows.h0, h // hk)
        gv = _groups(rows.h0, rows.h1 - rows.h0, h // hv)
        kheads = slice(gk.start, gk.start + gk.count)
        vheads = slice(gv.start, gv.start + gv.count)
        qs = _scaled_q(p, rows)
        do_blk = doa[rows.b, hs, rs]
        delta = np.einsum("hid,hid->hi", do_blk, oa[rows.b, hs, rs])
        if p.dropout4 is not None:
            do_blk = do_blk * p.ct.type(p.dropout_scale)
        do_st = _stacked(np.ascontiguousarray(do_blk), gv)
        dq_blk = np.zeros_like(qs)
        for t in rows.split(p.block_kv):
            cs = slice(t.c0, t.c1)
            mask = None if p.dropout4 is None else _broadcast_block(p.dropout4, t)

            # P = exp(S − Stats)
            prob = _tile_view(buf_p, t)
            _scores(p, t, qs, prob)
            _probs_rows(prob, lse[t.b, hs, rs])

            # dV += (P∘M·s)ᵀ·dO  (s is folded into do_st)
            ds = _tile_view(buf_ds, t)
            pm = prob if mask is None else np.multiply(prob, mask, out=ds)
            _accumulate(dv_[t.b, vheads, cs], _stacked(pm, gv).transpose(0, 2, 1), do_st, scratch)

            # dS = P∘((dO·Vᵀ)∘M·s − Δ)
            np.matmul(do_st, p.v[t.b, vheads, cs].transpose(0, 2, 1), out=_stacked(ds, gv))
            _dscores_rows(ds, prob, delta, mask)
            if dbias4 is not None:
                _add_dbias(dbias4, ds, t)

            # dQ += dS·K (scaled below) ; dK += dSᵀ·(scale·Q)
            ds_k = _stacked(ds, gk)
            _accumulate(_stacked(dq_blk, gk), ds_k, p.k[t.b, kheads, cs], scratch)
            _accumulate(dk[t.b, kheads, cs], ds_k.transpose(0, 2, 1), _stacked(qs, gk), scratch)
        np.multiply(dq_blk, p.ct.type(p.scale), out=dq_blk)
        dq[rows.b, hs, rs] = dq_blk

    dbias = None if dbias4 is None or dbias_shape is None else dbias4.reshape(dbias_shape)
    return dq, dk, dv_, dbias


def _accumulate(target: Array, left: Array, right: Array, scratch: Array) -> None:
    """``target += left @ right`` (stacked ``[n, r, x]``), the product written into ``scratch``."""
    out = scratch[: target.size].reshape(target.shape)
    np.matmul(left, right, out=out)
    np.add(target, out, out=target)


def _add_dbias(dbias4: Array, ds: Array, t: _Tile) -> None:
    """Sum the ``[hc, rows, cols]`` tile of dS over dbias's size-1 dims and accumulate it."""
    axes = tuple(ax for ax in range(3) if dbias4.shape[ax + 1] == 1)
    red = ds.sum(axis=axes, keepdims=True) if axes else ds
    block = _broadcast_block(dbias4, t)
    np.add(block, red, out=block)
