"""SDPA forward and backward over a packed (ragged, THD) batch: the definition, sequence by
sequence, on top of :func:`~.sdpa_math.sdpa_forward` and :func:`~.sdpa_math.sdpa_backward`.

A packed batch concatenates B sequences of different lengths along one token axis, with no
padding: Q, O, dO, dQ are ``[Tq, H, D]``, K and dK ``[Tkv, Hk, D]``, V and dV ``[Tkv, Hv, Dv]``,
Stats ``[Tq, H, 1]``. A :class:`Packing` says where each sequence lies: sequence ``b`` holds
tokens ``[bounds[b], bounds[b + 1])``. Q/O share one packing, K/V another, so each sequence
has its own ``Sq`` and ``Skv`` (they may differ). Each sequence is an independent attention
problem with the dense definition's semantics (``sdpa_math``'s module docstring): GQA heads,
causal top-left (``right_bound=0``) or bottom-right (the offset is that sequence's
``Skv − Sq``), the band bounds; a query row that sees no key has ``O = 0`` and
``Stats = +inf``. Tokens that no sequence holds (after ``bounds[B]``) get ``O = 0``,
``Stats = +inf`` and zero gradients.

hipDNN describes the same batch with a padded ``[B, H, S_max, D]`` tensor whose ragged offsets
hold ``B + 1`` element offsets (``TensorAttributes.set_ragged_offset``), times the offset
multiplier; :meth:`Packing.from_offsets` turns those into token bounds with the tensor's token
stride, and :func:`thd_view` reads such a buffer as ``[T, H, D]``.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> pq, pkv = Packing.from_lengths([2, 3]), Packing.from_lengths([4, 1])
    >>> q = rng.standard_normal((5, 2, 8)); k = rng.standard_normal((5, 1, 8))
    >>> v = rng.standard_normal((5, 1, 8))
    >>> o, stats = packed_sdpa_forward(q, k, v, pq, pkv, scale=0.5, right_bound=0,
    ...                                bottom_right=True)
    >>> o.shape, stats.shape
    ((5, 2, 8), (5, 2, 1))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .sdpa_math import sdpa_backward, sdpa_forward

__all__ = ["Packing", "packed_sdpa_backward", "packed_sdpa_forward", "thd_view"]

Array = npt.NDArray[Any]


@dataclass(frozen=True, eq=False)
class Packing:
    """Token bounds of a packed batch: sequence ``b`` holds tokens ``[bounds[b], bounds[b+1])``.

    Example:
        >>> p = Packing.from_offsets([0, 64, 64, 192], multiplier=1, token_stride=32)
        >>> p.bounds.tolist(), p.lengths.tolist(), p.batch
        ([0, 2, 2, 6], [2, 0, 4], 3)
    """

    bounds: npt.NDArray[np.int64]

    def __post_init__(self) -> None:
        b = self.bounds
        if b.ndim != 1 or b.size < 1:
            raise ValueError(f"packing bounds must be B + 1 integers, got shape {b.shape}")
        if b[0] < 0 or np.any(np.diff(b) < 0):
            raise ValueError(f"packing bounds must be >= 0 and non-decreasing, got {b.tolist()}")

    @classmethod
    def from_lengths(cls, lengths: Sequence[int] | npt.ArrayLike) -> Packing:
        """Sequences of these lengths, back to back from token 0 (cumulative sequence lengths)."""
        lens = np.asarray(lengths, dtype=np.int64).reshape(-1)
        return cls(np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))

    @classmethod
    def from_offsets(cls, offsets: npt.ArrayLike, multiplier: int, token_stride: int) -> Packing:
        """hipDNN's ragged offsets (``B + 1`` stored offsets, any shape) as token bounds: element
        offset = stored × ``multiplier``, token = element offset / ``token_stride`` (the stride
        of the sequence dim).

        Raises:
            ValueError: a non-positive stride or multiplier, an offset that is not a whole
                number of tokens, or decreasing offsets.
        """
        if token_stride <= 0 or multiplier <= 0:
            raise ValueError(
                f"token stride ({token_stride}) and multiplier ({multiplier}) must be positive"
            )
        elements = np.asarray(offsets).astype(np.int64).reshape(-1) * multiplier
        bad = np.flatnonzero(elements % token_stride)
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"ragged offset [{i}] = {int(elements[i])} elements is not a whole number of "
                f"tokens (token stride {token_stride})"
            )
        return cls(elements // token_stride)

    @property
    def batch(self) -> int:
        return int(self.bounds.size - 1)

    @property
    def lengths(self) -> npt.NDArray[np.int64]:
        return np.diff(self.bounds)


def thd_view(
    buffer: npt.ArrayLike, dims: Sequence[int], strides: Sequence[int], tokens: int
) -> Array:
    """``tokens`` tokens of a packed buffer as ``[T, H, D]``: hipDNN's ragged tensor with dims
    ``[B, H, S_max, D]`` and element strides ``[_, head, token, dim]`` (the batch stride is not
    used: the offsets place each sequence). A read-only view, not a copy.

    Example:
        >>> import numpy as np
        >>> thd_view(np.arange(12.0), [2, 2, 3, 2], [0, 2, 4, 1], tokens=3)[2].tolist()
        [[8.0, 9.0], [10.0, 11.0]]

    Raises:
        ValueError: the buffer is too small for ``tokens`` tokens.
    """
    flat = np.asarray(buffer).reshape(-1)
    heads, width = int(dims[1]), int(dims[3])
    head_stride, token_stride, dim_stride = (int(s) for s in strides[1:])
    if tokens <= 0:
        return flat[:0].reshape(0, heads, width)
    last = (tokens - 1) * token_stride + (heads - 1) * head_stride + (width - 1) * dim_stride
    if last >= flat.size:
        raise ValueError(
            f"a packed buffer of {flat.size} elements holds fewer than {tokens} tokens"
        )
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(
        flat,
        shape=(tokens, heads, width),
        strides=(token_stride * item, head_stride * item, dim_stride * item),
        writeable=False,
    )


def _dense(x: Array, lo: int, hi: int) -> Array:
    """Tokens ``[lo, hi)`` of a ``[T, H, D]`` array as one dense ``[1, H, S, D]`` batch."""
    return x[lo:hi].transpose(1, 0, 2)[None]


def _check(name: str, x: Array, packing: Packing) -> None:
    if x.ndim != 3:
        raise ValueError(f"{name} must be [T, H, D], got shape {x.shape}")
    if x.shape[0] < packing.bounds[-1]:
        raise ValueError(
            f"{name} holds {x.shape[0]} tokens, fewer than its packing's {packing.bounds[-1]}"
        )


def _pair(pq: Packing, pkv: Packing) -> None:
    if pq.batch != pkv.batch:
        raise ValueError(f"Q packs {pq.batch} sequences and K/V {pkv.batch}")


def packed_sdpa_forward(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    q_packing: Packing,
    kv_packing: Packing,
    *,
    scale: float,
    bottom_right: bool = False,
    left_bound: int | None = None,
    right_bound: int | None = None,
    compute_dtype: npt.DTypeLike = np.float32,
) -> tuple[Array, Array]:
    """SDPA forward of each packed sequence: ``(o [Tq, H, Dv], stats [Tq, H, 1])``.

    Args:
        q: Queries ``[Tq, H, D]``, packed by ``q_packing``.
        k: Keys ``[Tkv, Hk, D]``, packed by ``kv_packing``.
        v: Values ``[Tkv, Hv, Dv]``, packed by ``kv_packing``.
        q_packing: Where each sequence's queries (and outputs) lie.
        kv_packing: Where each sequence's keys and values lie.
        scale: Multiplies ``Q·Kᵀ``.
        bottom_right: Align the band's diagonal to each sequence's bottom-right corner.
        left_bound: Keys before ``i + offset − left_bound`` are invisible.
        right_bound: Keys after ``i + offset + right_bound`` are invisible (0: causal).
        compute_dtype: float32 or float64; the dtype of the results.

    Raises:
        ValueError: shapes that do not fit the packings, or packings of different batch sizes.
    """
    qa, ka, va = np.asarray(q), np.asarray(k), np.asarray(v)
    _pair(q_packing, kv_packing)
    for name, x, p in (("Q", qa, q_packing), ("K", ka, kv_packing), ("V", va, kv_packing)):
        _check(name, x, p)
    dtype = np.dtype(compute_dtype)
    o = np.zeros((qa.shape[0], qa.shape[1], va.shape[2]), dtype=dtype)
    stats = np.full((qa.shape[0], qa.shape[1], 1), np.inf, dtype=dtype)
    for b in range(q_packing.batch):
        q_lo, q_hi = (int(x) for x in q_packing.bounds[b : b + 2])
        kv_lo, kv_hi = (int(x) for x in kv_packing.bounds[b : b + 2])
        if q_hi == q_lo or kv_hi == kv_lo:
            continue  # no query, or no key to see: O = 0, Stats = +inf
        ob, sb = sdpa_forward(
            _dense(qa, q_lo, q_hi), _dense(ka, kv_lo, kv_hi), _dense(va, kv_lo, kv_hi),
            scale=scale, bottom_right=bottom_right, left_bound=left_bound,
            right_bound=right_bound, compute_dtype=dtype,
        )  # fmt: skip
        o[q_lo:q_hi] = ob[0].transpose(1, 0, 2)
        stats[q_lo:q_hi] = sb[0].transpose(1, 0, 2)
    return o, stats


def packed_sdpa_backward(
    q: npt.ArrayLike,
    k: npt.ArrayLike,
    v: npt.ArrayLike,
    o: npt.ArrayLike,
    do: npt.ArrayLike,
    stats: npt.ArrayLike,
    q_packing: Packing,
    kv_packing: Packing,
    *,
    scale: float,
    bottom_right: bool = False,
    left_bound: int | None = None,
    right_bound: int | None = None,
    compute_dtype: npt.DTypeLike = np.float32,
) -> tuple[Array, Array, Array]:
    """SDPA backward of each packed sequence from the given ``o`` and ``stats``:
    ``(dq [Tq, H, D], dk [Tkv, Hk, D], dv [Tkv, Hv, Dv])``; O, dO and Stats are packed as Q.
    The arguments mean what they mean in :func:`packed_sdpa_forward`.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(1)
        >>> p = Packing.from_lengths([3, 1])
        >>> q, k, v, do = (rng.standard_normal((4, 2, 4)) for _ in range(4))
        >>> o, lse = packed_sdpa_forward(q, k, v, p, p, scale=0.5)
        >>> [g.shape for g in packed_sdpa_backward(q, k, v, o, do, lse, p, p, scale=0.5)]
        [(4, 2, 4), (4, 2, 4), (4, 2, 4)]
    """
    qa, ka, va = np.asarray(q), np.asarray(k), np.asarray(v)
    oa, doa, sa = np.asarray(o), np.asarray(do), np.asarray(stats)
    _pair(q_packing, kv_packing)
    for name, x, p in (
        ("Q", qa, q_packing), ("K", ka, kv_packing), ("V", va, kv_packing),
        ("O", oa, q_packing), ("dO", doa, q_packing), ("Stats", sa, q_packing),
    ):  # fmt: skip
        _check(name, x, p)
    dtype = np.dtype(compute_dtype)
    dq, dk, dv = (np.zeros(x.shape, dtype=dtype) for x in (qa, ka, va))
    for b in range(q_packing.batch):
        q_lo, q_hi = (int(x) for x in q_packing.bounds[b : b + 2])
        kv_lo, kv_hi = (int(x) for x in kv_packing.bounds[b : b + 2])
        if q_hi == q_lo or kv_hi == kv_lo:
            continue  # nothing attends: every gradient of this sequence is zero
        gq, gk, gv, _ = sdpa_backward(
            _dense(qa, q_lo, q_hi), _dense(ka, kv_lo, kv_hi), _dense(va, kv_lo, kv_hi),
            _dense(oa, q_lo, q_hi), _dense(doa, q_lo, q_hi), _dense(sa, q_lo, q_hi),
            scale=scale, bottom_right=bottom_right, left_bound=left_bound,
            right_bound=right_bound, compute_dtype=dtype,
        )  # fmt: skip
        dq[q_lo:q_hi] = gq[0].transpose(1, 0, 2)
        dk[kv_lo:kv_hi] = gk[0].transpose(1, 0, 2)
        dv[kv_lo:kv_hi] = gv[0].transpose(1, 0, 2)
    return dq, dk, dv
