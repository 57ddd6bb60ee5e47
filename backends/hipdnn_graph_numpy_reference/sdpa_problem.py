"""Shared set-up of the SDPA math: argument checks, casts and the choice of code path.

Both code paths of :mod:`hipdnn_graph_numpy_reference.sdpa_math` start here: :func:`prepare` checks
and casts the forward's arguments once into a :class:`Problem`, :func:`prepare_backward` adds the
backward's ``o``, ``do``, ``stats`` and dBias shape, and :func:`small_batch` says whether the
problem is small enough for the untiled path (:mod:`.sdpa_small`) or needs the tiled one
(:mod:`.sdpa_tiled`). Nothing here allocates more than the cast copies of the inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hipdnn_graph import MaskWindow

from .masks import padding_lengths
from .philox_mask import PhiloxKeepMask

__all__ = [
    "SMALL_PATH",
    "TILE_BYTES",
    "Array",
    "Backward",
    "Problem",
    "alibi_slopes",
    "prepare",
    "prepare_backward",
    "small_batch",
]

Array = npt.NDArray[Any]

TILE_BYTES = 8 << 20
"""Target size in bytes of one score tile (the backward's ``[heads, block_q, block_kv]``).

A problem whose ``[H, Sq, Skv]`` scores of one batch element fit in it takes the untiled path.
"""

SMALL_PATH = True
"""Use the untiled path for problems that fit in one tile (tests set False to compare paths)."""

#: the compute dtypes, under their usual spellings (a dict look-up is cheaper than np.dtype)
_FLOATS: dict[Any, np.dtype[Any]] = {
    spelling: np.dtype(t) for t in (np.float32, np.float64) for spelling in (t, np.dtype(t))
}


def alibi_slopes(num_heads: int) -> npt.NDArray[np.float64]:
    """The standard ALiBi slopes ``2^(−8(h+1)/H)`` of the ``H`` query heads.

    Example:
        >>> alibi_slopes(4).tolist()
        [0.25, 0.0625, 0.015625, 0.00390625]
    """
    return np.exp2(-8.0 * np.arange(1, num_heads + 1, dtype=np.float64) / num_heads)


@dataclass(slots=True)
class Problem:
    """The forward's inputs cast to the compute dtype, plus the keyword arguments, checked.

    ``lens_q``/``lens_kv`` are the per-batch valid lengths, or None where that side has no
    padding (also when every length is the full size).
    """

    q: Array
    k: Array
    v: Array
    scale: float
    ct: np.dtype[Any]
    bias4: Array | None
    #: the keep mask: an array, or a philox mask drawn block by block where it is read
    dropout4: Array | PhiloxKeepMask | None
    dropout_scale: float
    alibi: bool
    bottom_right: bool
    left_bound: int | None
    right_bound: int | None
    lens_q: npt.NDArray[np.int64] | None
    lens_kv: npt.NDArray[np.int64] | None
    block_q: int | None
    #: batch elements per call of the untiled path; 0: the tiled path (see :func:`small_batch`)
    per_call: int = 0

    @property
    def shape(self) -> tuple[int, int, int, int, int, int, int, int]:
        """``(B, H, Sq, D, Hk, Skv, Hv, Dv)``."""
        b, h, sq, d = self.q.shape
        return b, h, sq, d, self.k.shape[1], self.k.shape[2], self.v.shape[1], self.v.shape[3]

    @property
    def slopes(self) -> Array | None:
        """The ALiBi slopes in the compute dtype, or None without ALiBi."""
        return alibi_slopes(self.q.shape[1]).astype(self.ct) if self.alibi else None


@dataclass(slots=True)
class Backward:
    """The backward's extra inputs: ``o``/``do`` and ``lse`` (``[B,H,Sq,1]``, ``−inf`` read as
    ``+inf``) in the compute dtype, and the shape of dBias (None: no dBias)."""

    o: Array
    do: Array
    lse: Array
    dbias_shape: tuple[int, ...] | None


def as4(x: Array) -> Array:
    """``x`` with leading 1s up to rank 4 (a view)."""
    return x.reshape((1,) * (4 - x.ndim) + x.shape)


def check_broadcast(name: str, shape: tuple[int, ...], full: tuple[int, ...]) -> None:
    """Raise unless ``shape`` (rank ≤ 4) broadcasts right-aligned to ``full``, dims 1 or full."""
    if len(shape) > 4 or any(
        s not in (1, f) for s, f in zip(reversed(shape), reversed(full), strict=False)
    ):
        raise ValueError(f"{name} of shape {shape} does not broadcast to {full}")


def _lengths(seq_len: npt.ArrayLike | None, batch: int, full: int) -> npt.NDArray[np.int64] | None:
    if seq_len is None:
        return None
    lens = padding_lengths(seq_len, batch, full)
    return None if bool((lens == full).all()) else lens


def prepare(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
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
) -> Problem:
    """Check and cast the arguments of ``sdpa_forward`` (and the shared ones of the backward).

    Raises:
        ValueError: Shapes that do not fit together, or an unsupported compute dtype.
    """
    ct = _FLOATS.get(compute_dtype) if isinstance(compute_dtype, type | np.dtype) else None
    if ct is None:
        ct = _FLOATS.get(np.dtype(compute_dtype))
        if ct is None:
            raise ValueError(f"compute_dtype must be float32 or float64, got {compute_dtype}")
    qa = np.ascontiguousarray(q, dtype=ct)
    ka = np.ascontiguousarray(k, dtype=ct)
    va = np.ascontiguousarray(v, dtype=ct)
    if qa.ndim != 4 or ka.ndim != 4 or va.ndim != 4:
        for name, x in (("q", qa), ("k", ka), ("v", va)):
            if x.ndim != 4:
                raise ValueError(f"{name} must be rank-4, got shape {x.shape}")
    b, h, sq, d = qa.shape
    _, hk, skv, dk = ka.shape
    bv, hv, skv_v, _ = va.shape
    if ka.shape[0] != b or bv != b or dk != d or skv_v != skv:
        raise ValueError(f"shapes do not fit: q {qa.shape}, k {ka.shape}, v {va.shape}")
    if hk < 1 or hv < 1 or h % hk or h % hv:
        raise ValueError(f"H={h} must be divisible by Hk={hk} and Hv={hv}")

    bias4 = None
    if bias is not None:
        bias_arr = np.asarray(bias)
        check_broadcast("bias", bias_arr.shape, (b, h, sq, skv))
        if bias_arr.dtype == np.bool_:  # a mask: True attends, False hides (torch's attn_mask)
            bias_arr = np.where(bias_arr, ct.type(0), ct.type(-np.inf))
        bias4 = as4(bias_arr.astype(ct, copy=False))

    dropout4: Array | PhiloxKeepMask | None = None
    if isinstance(dropout_mask, PhiloxKeepMask):
        if dropout_mask.shape != (b, h, sq, skv):
            raise ValueError(f"philox mask of shape {dropout_mask.shape} is not [B, H, Sq, Skv]")
        dropout4 = dropout_mask
    elif dropout_mask is not None:
        mask = np.asarray(dropout_mask)
        if mask.ndim != 4 or mask.shape[2:] != (sq, skv) or mask.shape[0] not in (1, b):
            raise ValueError(f"dropout_mask of shape {mask.shape} is not [B|1, H|1, Sq, Skv]")
        if mask.shape[1] not in (1, h):
            raise ValueError(f"dropout_mask of shape {mask.shape} is not [B|1, H|1, Sq, Skv]")
        if mask.dtype.kind not in "biu" and mask.dtype != ct:
            mask = mask.astype(ct)
        dropout4 = mask

    if left_bound is not None or right_bound is not None:  # exact for any int64 bound
        window = MaskWindow(left_bound=left_bound, right_bound=right_bound).within(sq, skv)
        left_bound, right_bound = window.left_bound, window.right_bound

    return Problem(
        qa,
        ka,
        va,
        float(scale),
        ct,
        bias4,
        dropout4,
        float(dropout_scale),
        bool(alibi),
        bool(bottom_right),
        left_bound,
        right_bound,
        None if seq_len_q is None else _lengths(seq_len_q, b, sq),
        None if seq_len_kv is None else _lengths(seq_len_kv, b, skv),
        block_q,
        small_batch((b, h, sq, skv), ct.itemsize, block_q),
    )


def prepare_backward(
    p: Problem,
    o: npt.ArrayLike,
    do: npt.ArrayLike,
    stats: npt.ArrayLike,
    bias_shape: tuple[int, ...] | None,
    dbias_shape: tuple[int, ...] | None,
    compute_dbias: bool | None,
) -> Backward:
    """Check and cast the backward's own arguments.

    dBias: ``compute_dbias=False`` gives none; otherwise its shape is ``dbias_shape``, else the
    bias's shape; None with neither gives none, True with neither raises.

    Raises:
        ValueError: Shapes that do not fit, or dBias requested with no shape to give it.
    """
    ct = p.ct
    oa = np.ascontiguousarray(o, dtype=ct)
    doa = np.ascontiguousarray(do, dtype=ct)
    b, h, sq = p.q.shape[:3]
    want = (b, h, sq, p.v.shape[3])
    if oa.shape != want or doa.shape != want:
        for name, x in (("o", oa), ("do", doa)):
            if x.shape != want:
                raise ValueError(f"{name} must have shape {want}, got {x.shape}")
    lse = np.asarray(stats, dtype=ct)
    if lse.shape != (b, h, sq, 1):
        if lse.size != b * h * sq:
            raise ValueError(f"stats must have shape {(b, h, sq, 1)}, got {lse.shape}")
        lse = lse.reshape(b, h, sq, 1)
    if lse.size and not lse.flat[lse.argmin()] > -np.inf:  # -inf (or NaN) somewhere
        # a private copy: the caller's stats stay untouched
        lse = np.where(np.isneginf(lse), ct.type(np.inf), lse)

    shape = None
    if compute_dbias is not False:
        shape = dbias_shape if dbias_shape is not None else bias_shape
        if shape is None and compute_dbias:
            raise ValueError("compute_dbias=True needs a bias or a dbias_shape")
    if shape is not None:
        shape = tuple(int(n) for n in shape)
        check_broadcast("dbias_shape", shape, (b, h, sq, p.k.shape[2]))
    return Backward(oa, doa, lse, shape)


def small_batch(shape: tuple[int, int, int, int], itemsize: int, block_q: int | None) -> int:
    """Batch elements per call of the untiled path; 0: the problem needs the tiled path.

    ``shape`` is ``(B, H, Sq, Skv)``. The untiled path takes problems whose scores
    ``[H, Sq, Skv]`` for one batch element fit in :data:`TILE_BYTES` (and as many batch elements
    at once as fit), unless the caller asked for query blocks smaller than ``Sq`` or a dimension
    is empty.
    """
    b, h, sq, skv = shape
    if not SMALL_PATH or (block_q is not None and block_q < sq) or not (b and h and sq and skv):
        return 0
    return min(b, TILE_BYTES // (h * sq * skv * itemsize))
