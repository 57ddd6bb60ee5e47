"""The tiled path of the SDPA math, for problems too large for one tile.

The math is that of :mod:`hipdnn_graph_numpy_reference.sdpa_math`; this module bounds its memory:

* Work is tiled over blocks of ``block_q`` query rows, so the extra memory is
  ``O(block_q × Skv)`` at most: the forward's tile holds whole rows (its max and sum are exact
  over all visible keys, no online-softmax rescaling), the backward's tiles
  ``[block_q, block_kv]`` also split the keys (it needs no row-wise reduction: Stats and Δ are
  given) and stay about :data:`~.sdpa_problem.TILE_BYTES`. Default blocks are 64–1024 rows (few,
  large BLAS calls: fewer thread synchronisations), inside a band at most half the mean visible
  width (less masked work on the band's edges). Heads of one batch element are stacked into
  one tile while they fit (stacked matmuls; the GQA sum over shared K/V heads is folded into the
  matmul's inner dimension).
* Matmuls are BLAS calls on contiguous blocks (multi-threaded by the BLAS library); the
  elementwise steps run in place on the tiles, in the compute dtype.
* For each query block only the key columns that can be visible under the band and padding are
  touched (:class:`~.masks.KeyBand`); fully masked rows and columns are skipped, and only the
  band's edges are masked elementwise (with ``−inf`` before the exponential).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from . import sdpa_problem
from .masks import KeyBand, QueryBlock, band_for_batch, padding_lengths
from .philox_mask import PhiloxKeepMask
from .sdpa_problem import Array, Backward, Problem

__all__ = ["backward", "choose_blocks", "forward"]

_BLOCK_Q = (64, 1024)  # default query block: thin blocks make slow matmuls and many BLAS calls
_BAND_BLOCK_FRACTION = 2  # banded: block ≤ mean visible width / 2 (≤ ~1/4 of a tile is masked)


# --------------------------------------------------------------------------------------------
# Tiling
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


def choose_blocks(
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
    budget = sdpa_problem.TILE_BYTES // itemsize
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


@dataclass(frozen=True)
class _Tiling:
    """The visible keys of every batch element and the tile sizes."""

    bands: list[KeyBand]
    block_q: int
    block_kv: int
    head_chunk: int
    slopes: Array | None


def _tiling(p: Problem, whole_rows: bool) -> _Tiling:
    b, h, sq, _, hk, skv, hv, _ = p.shape
    lens_q = padding_lengths(p.lens_q, b, sq)
    lens_kv = padding_lengths(p.lens_kv, b, skv)
    bands = [
        band_for_batch(
            int(lens_q[i]),
            int(lens_kv[i]),
            bottom_right=p.bottom_right,
            left_bound=p.left_bound,
            right_bound=p.right_bound,
        )
        for i in range(b)
    ]
    if p.left_bound is None and p.right_bound is None and p.lens_kv is None:
        mean_width = float(skv)  # every row that sees a key sees all of them
    else:
        mean_width = max((band.mean_width() for band in bands), default=0.0)
    bq, bkv, hc = choose_blocks(
        h, sq, skv, (h // hk, h // hv), mean_width, p.ct.itemsize, p.block_q, whole_rows
    )
    return _Tiling(bands, bq, bkv, hc, p.slopes)


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
        return self.h1 - self.h0, self.blk.i1 - self.blk.i0, self.blk.c1 - self.blk.c0

    def split(self, width: int) -> Iterator[_Tile]:
        """The same heads and rows over column chunks of at most ``width`` keys."""
        for blk in self.blk.split(width):
            yield _Tile(self.b, self.h0, self.h1, blk)


def _tiles(p: Problem, tl: _Tiling) -> Iterator[_Tile]:
    """Tiles of whole visible rows; rows seeing no key, and keys no row sees, never appear."""
    heads = p.q.shape[1]
    for b, band in enumerate(tl.bands):
        for blk in band.blocks(tl.block_q):
            for h0 in range(0, heads, tl.head_chunk):
                yield _Tile(b, h0, h0 + tl.head_chunk, blk)


def _tile_view(buf: Array, t: _Tile) -> Array:
    """A contiguous ``[hc, rows, cols]`` view on the front of the flat scratch buffer ``buf``."""
    hc, rows, cols = t.shape
    return buf[: hc * rows * cols].reshape(t.shape)


def _stacked(x: Array, g: _Groups) -> Array:
    """``[hc, rows, n]`` → ``[count, per·rows, n]`` (a view when ``x`` is contiguous)."""
    return x.reshape(g.count, -1, x.shape[-1])


def _broadcast_block(x4: Array | PhiloxKeepMask, t: _Tile) -> Array:
    """The ``[hc|1, rows|1, cols|1]`` block of a 4-D array broadcastable to ``[B,H,Sq,Skv]``."""
    nb, nh, nq, nk = x4.shape
    return x4[
        t.b if nb > 1 else 0,
        slice(t.h0, t.h1) if nh > 1 else slice(0, 1),
        slice(t.blk.i0, t.blk.i1) if nq > 1 else slice(0, 1),
        slice(t.blk.c0, t.blk.c1) if nk > 1 else slice(0, 1),
    ]


def _scaled_q(p: Problem, t: _Tile) -> Array:
    """The tile's ``scale·Q`` block, a fresh contiguous ``[hc, rows, D]`` array."""
    qs: Array = np.multiply(p.q[t.b, t.h0 : t.h1, t.blk.i0 : t.blk.i1], p.ct.type(p.scale))
    return qs


def _scores(p: Problem, tl: _Tiling, t: _Tile, qs: Array, out: Array) -> None:
    """``out ← scale·Q·Kᵀ + bias + alibi`` over the tile, ``−inf`` where invisible.

    ``qs`` is the tile's ``scale·Q`` block (:func:`_scaled_q`).
    """
    g = _groups(t.h0, t.h1 - t.h0, p.q.shape[1] // p.k.shape[1])
    kb = p.k[t.b, g.start : g.start + g.count, t.blk.c0 : t.blk.c1]
    np.matmul(_stacked(qs, g), kb.transpose(0, 2, 1), out=_stacked(out, g))
    if p.bias4 is not None:
        np.add(out, _broadcast_block(p.bias4, t), out=out)
    if tl.slopes is not None:
        cols, rows = np.arange(t.blk.c0, t.blk.c1), np.arange(t.blk.i0, t.blk.i1)
        rel = (cols[None, :] - rows[:, None]).astype(p.ct)  # rel[i, j] = j - i
        scratch = np.empty_like(rel)
        for hh in range(t.h0, t.h1):
            np.multiply(rel, tl.slopes[hh], out=scratch)
            np.add(out[hh - t.h0], scratch, out=out[hh - t.h0])
    left, right = t.blk.left, t.blk.right
    if left is not None:
        np.copyto(out[:, :, : left.shape[1]], -np.inf, where=left)
    if right is not None:
        np.copyto(out[:, :, out.shape[2] - right.shape[1] :], -np.inf, where=right)


# --------------------------------------------------------------------------------------------
# Forward
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


def forward(p: Problem) -> tuple[Array, Array]:
    """``(o, stats)``, tile by tile (whole rows per tile)."""
    tl = _tiling(p, whole_rows=True)
    b, h, sq, _, _, skv, hv, dv = p.shape
    o = np.zeros((b, h, sq, dv), dtype=p.ct)
    stats = np.full((b, h, sq, 1), np.inf, dtype=p.ct)
    scores = np.empty(tl.head_chunk * tl.block_q * skv, dtype=p.ct)
    for t in _tiles(p, tl):
        hs, rs, cs = slice(t.h0, t.h1), slice(t.blk.i0, t.blk.i1), slice(t.blk.c0, t.blk.c1)
        s = _tile_view(scores, t)
        _scores(p, tl, t, _scaled_q(p, t), s)
        m, lsum = np.empty(t.shape[:2], dtype=p.ct), np.empty(t.shape[:2], dtype=p.ct)
        mask = None if p.dropout4 is None else _broadcast_block(p.dropout4, t)
        _softmax_rows(s, m, lsum, mask)
        g = _groups(t.h0, t.h1 - t.h0, h // hv)
        pv = np.matmul(_stacked(s, g), p.v[t.b, g.start : g.start + g.count, cs])
        seen = lsum > 0
        inv = np.divide(p.dropout_scale, lsum, out=np.zeros_like(lsum), where=seen)
        o[t.b, hs, rs] = pv.reshape((*inv.shape, dv)) * inv[:, :, None]
        lse = np.log(lsum, out=np.full_like(lsum, np.inf), where=seen)
        np.add(lse, m, out=lse, where=seen)
        stats[t.b, hs, rs, 0] = lse
    return o, stats


# --------------------------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------------------------


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


def backward(p: Problem, g: Backward) -> tuple[Array, Array, Array, Array | None]:
    """``(dq, dk, dv, dbias)``, tile by tile (tiles split the keys too)."""
    tl = _tiling(p, whole_rows=False)
    b, h, sq, d, hk, skv, hv, dv = p.shape
    oa, doa, lse = g.o, g.do, g.lse.reshape(b, h, sq)
    dq = np.zeros((b, h, sq, d), dtype=p.ct)
    dk = np.zeros((b, hk, skv, d), dtype=p.ct)
    dv_ = np.zeros((b, hv, skv, dv), dtype=p.ct)
    dbias4 = None
    if g.dbias_shape is not None:
        dbias4 = np.zeros((1,) * (4 - len(g.dbias_shape)) + g.dbias_shape, dtype=p.ct)

    tile = tl.head_chunk * tl.block_q * tl.block_kv
    buf_p, buf_ds = np.empty(tile, dtype=p.ct), np.empty(tile, dtype=p.ct)
    scratch = np.empty(tl.head_chunk * max(tl.block_kv, tl.block_q) * max(d, dv), dtype=p.ct)
    for rows in _tiles(p, tl):
        hs, rs = slice(rows.h0, rows.h1), slice(rows.blk.i0, rows.blk.i1)
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
        for t in rows.split(tl.block_kv):
            cs = slice(t.blk.c0, t.blk.c1)
            mask = None if p.dropout4 is None else _broadcast_block(p.dropout4, t)

            # P = exp(S − Stats)
            prob = _tile_view(buf_p, t)
            _scores(p, tl, t, qs, prob)
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

    dbias = None if dbias4 is None or g.dbias_shape is None else dbias4.reshape(g.dbias_shape)
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
