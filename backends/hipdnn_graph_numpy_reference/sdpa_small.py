"""The untiled path of the SDPA math, for problems whose scores fit in one tile.

The same math as :mod:`.sdpa_tiled` (see :mod:`hipdnn_graph_numpy_reference.sdpa_math`) with a few
batched NumPy operations on whole ``[b, H, Sq, Skv]`` score arrays, ``b`` batch elements at a
time (all of them when they fit in :data:`~.sdpa_problem.TILE_BYTES`): no bands, no tiles, no
per-tile bookkeeping, so tiny problems cost little more than their dozen NumPy calls.

* GQA: the ``H/Hk`` query heads sharing a K head are consecutive, so ``[b, H, Sq, x]`` reshapes
  to ``[b, Hk, (H/Hk)·Sq, x]`` and one stacked matmul per K head does the work and the sum
  (likewise for V).
* Masking: ALiBi and the band of an unpadded problem form one additive ``[H|1, Sq, Skv]`` array
  (``slope_h·(j − i)``, ``−inf`` where invisible), built once per shape and kept while small;
  with padding the visibility of each batch element is built per call
  (:func:`~.masks.visibility`) and ``−inf`` written where it is False.
* A row whose scores are all ``−inf`` gets ``exp(S − m) = 0`` with ``m`` clamped to the lowest
  finite value, hence ``lsum = 0``, ``O = 0`` and ``Stats = +inf``; in the backward its
  ``P = exp(−inf − Stats) = 0``, so every gradient it touches is exactly 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .masks import visibility
from .philox_mask import PhiloxKeepMask
from .sdpa_problem import Array, Backward, Problem

_ALL = slice(None)

__all__ = ["additive", "backward", "backward_block", "forward"]

_LOWEST = {np.dtype(t): np.finfo(t).min for t in (np.float32, np.float64)}


def _einsum_rowdot(a: Array, b: Array) -> Array:  # pragma: no cover - NumPy 1.x
    dot: Array = np.einsum("...d,...d->...", a, b)
    return dot


#: ``Σ_d a∘b`` over the last dim (np.vecdot from NumPy 2.0)
_rowdot: Any = getattr(np, "vecdot", _einsum_rowdot)

#: additive masks by (dtype, ALiBi heads or 0, Sq, Skv, band or None); small ones only
_ADDITIVE: dict[tuple[Any, ...], Array | None] = {}
_ADDITIVE_ENTRIES = 64
_ADDITIVE_BYTES = 1 << 18


def additive(p: Problem) -> Array | None:
    """ALiBi plus (without padding) the band's ``−inf``, as one read-only ``[H|1, Sq, Skv]``."""
    padded = p.lens_q is not None or p.lens_kv is not None
    banded = p.left_bound is not None or p.right_bound is not None
    if not p.alibi and (padded or not banded):
        return None
    h, sq = p.q.shape[1:3]
    skv = p.k.shape[2]
    band = None if padded or not banded else (p.bottom_right, p.left_bound, p.right_bound)
    key = (p.ct, h if p.alibi else 0, sq, skv, band)
    if key in _ADDITIVE:
        return _ADDITIVE[key]
    add = None
    slopes = p.slopes
    if slopes is not None:
        rel = (np.arange(skv)[None, :] - np.arange(sq)[:, None]).astype(p.ct)  # j − i
        add = slopes[:, None, None] * rel
    if band is not None:
        full_q, full_kv = np.array([sq]), np.array([skv])
        vis = visibility(
            full_q,
            full_kv,
            sq,
            skv,
            bottom_right=p.bottom_right,
            left_bound=p.left_bound,
            right_bound=p.right_bound,
        )[0]
        if not vis.all():
            minus = np.where(vis, 0.0, -np.inf).astype(p.ct)
            add = minus if add is None else add + minus
    if add is not None:
        add.flags.writeable = False
    if add is None or add.nbytes <= _ADDITIVE_BYTES:
        if len(_ADDITIVE) >= _ADDITIVE_ENTRIES:
            _ADDITIVE.clear()
        _ADDITIVE[key] = add
    return add


def _hidden(p: Problem) -> npt.NDArray[np.bool_] | None:
    """With padding: True where key j is invisible to query i, ``[B, 1, Sq, Skv]``."""
    if p.lens_q is None and p.lens_kv is None:
        return None
    b, _, sq = p.q.shape[:3]
    skv = p.k.shape[2]
    lens_q = np.full(b, sq, dtype=np.int64) if p.lens_q is None else p.lens_q
    lens_kv = np.full(b, skv, dtype=np.int64) if p.lens_kv is None else p.lens_kv
    vis = visibility(
        lens_q,
        lens_kv,
        sq,
        skv,
        bottom_right=p.bottom_right,
        left_bound=p.left_bound,
        right_bound=p.right_bound,
    )
    return ~vis


def _b(x: Array | None, sl: slice) -> Array | None:
    """Batch elements ``sl`` of ``x``; a size-1 batch dim broadcasts."""
    return x if x is None or x.shape[0] == 1 else x[sl]


def _mask(x: Array | PhiloxKeepMask | None, sl: slice = _ALL) -> Array | None:
    """Batch elements ``sl`` of the dropout mask as an array (a philox mask draws just them)."""
    if isinstance(x, PhiloxKeepMask):
        return x[sl]
    return _b(x, sl)


def _scores(
    qs: Array, k: Array, bias: Array | None, add: Array | None, hidden: Array | None
) -> Array:
    """``scale·Q·Kᵀ + bias + ALiBi`` with ``−inf`` where invisible, ``[b, H, Sq, Skv]``."""
    nb, h, sq, d = qs.shape
    hk = k.shape[1]
    if hk == h:
        s: Array = np.matmul(qs, k.transpose(0, 1, 3, 2))
    else:
        s = np.matmul(qs.reshape(nb, hk, -1, d), k.transpose(0, 1, 3, 2))
        s = s.reshape(nb, h, sq, k.shape[2])
    if bias is not None:
        np.add(s, bias, out=s)
    if add is not None:
        np.add(s, add, out=s)
    if hidden is not None:
        np.copyto(s, -np.inf, where=hidden)
    return s


def _chunks(batch: int, per_call: int) -> list[slice]:
    return [slice(b0, b0 + per_call) for b0 in range(0, batch, per_call)]


def forward(p: Problem, per_call: int) -> tuple[Array, Array]:
    """``(o, stats)`` of the whole problem, ``per_call`` batch elements at a time."""
    add, hidden = additive(p), _hidden(p)
    b = p.q.shape[0]
    if per_call >= b:
        return _forward(p, p.q, p.k, p.v, p.bias4, _mask(p.dropout4), add, hidden)
    o = np.empty((*p.q.shape[:3], p.v.shape[3]), dtype=p.ct)
    stats = np.empty((*p.q.shape[:3], 1), dtype=p.ct)
    for sl in _chunks(b, per_call):
        mask = _mask(p.dropout4, sl)
        o[sl], stats[sl] = _forward(
            p, p.q[sl], p.k[sl], p.v[sl], _b(p.bias4, sl), mask, add, _b(hidden, sl)
        )
    return o, stats


def _forward(
    p: Problem,
    q: Array,
    k: Array,
    v: Array,
    bias: Array | None,
    mask: Array | None,
    add: Array | None,
    hidden: Array | None,
) -> tuple[Array, Array]:
    nb, h, sq, _ = q.shape
    hv, dv = v.shape[1], v.shape[3]
    s = _scores(np.multiply(q, p.scale), k, bias, add, hidden)
    m = np.maximum.reduce(s, axis=3, keepdims=True)
    np.maximum(m, _LOWEST[p.ct], out=m)  # a keyless row: exp(−inf − lowest) = 0, lsum = 0
    np.subtract(s, m, out=s)
    np.exp(s, out=s)
    lsum = np.add.reduce(s, axis=3, keepdims=True)
    if mask is not None:
        np.multiply(s, mask, out=s)
    if hv == h:
        pv: Array = np.matmul(s, v)
    else:
        pv = np.matmul(s.reshape(nb, hv, -1, s.shape[3]), v).reshape(nb, h, sq, dv)
    seen = lsum > 0
    inv = np.divide(p.dropout_scale, lsum, out=np.zeros_like(lsum), where=seen)
    o = np.multiply(pv, inv, out=pv)
    stats = np.log(lsum, out=np.full_like(lsum, np.inf), where=seen)
    np.add(stats, m, out=stats, where=seen)
    return o, stats


def backward(p: Problem, g: Backward, per_call: int) -> tuple[Array, Array, Array, Array | None]:
    """``(dq, dk, dv, dbias)`` of the whole problem, ``per_call`` batch elements at a time."""
    add, hidden = additive(p), _hidden(p)
    b = p.q.shape[0]
    shape = g.dbias_shape
    if per_call >= b:
        dq, dk, dv, dbias = backward_block(
            p, p.q, p.k, p.v, g.o, g.do, g.lse, p.bias4, _mask(p.dropout4), add, hidden, shape
        )
        return dq, dk, dv, None if dbias is None or shape is None else dbias.reshape(shape)
    dq = np.empty(p.q.shape, dtype=p.ct)
    dk = np.empty(p.k.shape, dtype=p.ct)
    dv = np.empty(p.v.shape, dtype=p.ct)
    dbias4 = None if shape is None else np.zeros((1,) * (4 - len(shape)) + shape, dtype=p.ct)
    for sl in _chunks(b, per_call):
        dq[sl], dk[sl], dv[sl], part = backward_block(
            p,
            p.q[sl],
            p.k[sl],
            p.v[sl],
            g.o[sl],
            g.do[sl],
            g.lse[sl],
            _b(p.bias4, sl),
            _mask(p.dropout4, sl),
            add,
            _b(hidden, sl),
            shape,
        )
        if dbias4 is not None and part is not None:
            target = dbias4 if dbias4.shape[0] == 1 else dbias4[sl]
            np.add(target, part, out=target)
    return dq, dk, dv, None if dbias4 is None or shape is None else dbias4.reshape(shape)


def backward_block(
    p: Problem,
    q: Array,
    k: Array,
    v: Array,
    o: Array,
    do: Array,
    lse: Array,
    bias: Array | None,
    mask: Array | None,
    add: Array | None,
    hidden: Array | None,
    dbias_shape: tuple[int, ...] | None,
) -> tuple[Array, Array, Array, Array | None]:
    """The backward of batch elements ``q.shape[0]`` (arrays already sliced to them).

    ``add`` is :func:`additive`'s array, ``hidden`` the padding's (sliced) invisibility, and
    only ``p.scale`` and ``p.dropout_scale`` are read from ``p``.
    """
    nb, h, sq, d = q.shape
    hk, skv, hv, dv = k.shape[1], k.shape[2], v.shape[1], v.shape[3]
    qs = np.multiply(q, p.scale)  # a Python float: computed in the compute dtype

    # P = exp(S − Stats)
    prob = _scores(qs, k, bias, add, hidden)
    np.subtract(prob, lse, out=prob)
    np.exp(prob, out=prob)
    delta = _rowdot(do, o)[..., None]

    # dV = (P∘M·s)ᵀ·dO (s folded into dO)
    pm = prob
    if mask is not None:
        do = np.multiply(do, p.dropout_scale)
        pm = np.multiply(prob, mask, out=np.empty_like(prob))
    if hv != h:
        pm, do = pm.reshape(nb, hv, -1, skv), do.reshape(nb, hv, -1, dv)
    dv_: Array = np.matmul(pm.transpose(0, 1, 3, 2), do)

    # dS = P∘((dO·Vᵀ)∘M·s − Δ)
    ds: Array = np.matmul(do, v.transpose(0, 1, 3, 2))
    if hv != h:
        ds = ds.reshape(nb, h, sq, skv)
    if mask is not None:
        np.multiply(ds, mask, out=ds)
    np.subtract(ds, delta, out=ds)
    np.multiply(ds, prob, out=ds)
    dbias = None
    if dbias_shape is not None:
        shape4 = (1,) * (4 - len(dbias_shape)) + dbias_shape
        axes = tuple(ax for ax in range(4) if shape4[ax] == 1 and ds.shape[ax] != 1)
        dbias = np.add.reduce(ds, axis=axes, keepdims=True) if axes else ds

    # dQ = scale·dS·K ; dK = dSᵀ·(scale·Q)
    if hk != h:
        ds, qs = ds.reshape(nb, hk, -1, skv), qs.reshape(nb, hk, -1, d)
    dq: Array = np.matmul(ds, k)
    np.multiply(dq, p.scale, out=dq)
    dk: Array = np.matmul(ds.transpose(0, 1, 3, 2), qs)
    return dq.reshape(nb, h, sq, d) if hk != h else dq, dk, dv_, dbias
