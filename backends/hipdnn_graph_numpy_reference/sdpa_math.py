"""Scaled dot-product attention, forward and backward: the executable definition of the math.

Every other SDPA engine of the project is tested against these two functions, and they are
tested against a full-matrix float64 torch-autograd reference. Pure NumPy; no dependency on
``hipdnn_graph``.

Shapes: ``q [B,H,Sq,D]``, ``k [B,Hk,Skv,D]``, ``v [B,Hv,Skv,Dv]``, ``o``/``do [B,H,Sq,Dv]``,
``stats [B,H,Sq,1]``.

Math (the docs' "SDPA math" page), for query head ``h`` of batch element ``b``:

* GQA/MQA: head ``h`` reads K head ``h // (H/Hk)`` and V head ``h // (H/Hv)``; ``Hk`` and
  ``Hv`` are independent. dK and dV sum over the query heads that share a K or V head.
* ``S = scale·Q·Kᵀ + bias (+ slope_h·(j − i) with ALiBi)``, ``slope_h = 2^(−8(h+1)/H)``,
  ``i``/``j`` the absolute query/key positions (whatever the diagonal alignment).
* ``bias`` has rank ≤ 4 and broadcasts NumPy-style (right-aligned) to ``[B,H,Sq,Skv]``; every
  dim must be 1 or the full size. ``dbias`` is ``dS`` summed down to ``dbias_shape`` (default
  ``bias.shape``) with the same right-aligned rule.
* Visibility of key ``j`` to query ``i`` (see :mod:`hipdnn_graph_numpy_reference.masks`):
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

Implementation (the code paths compute the same math and are tested against each other):

* Inputs of any float dtype (float16, ml_dtypes.bfloat16, …) and any strides are read, never
  modified, and cast to ``compute_dtype`` (float32 or float64), which is also the dtype of every
  output. With float32 everything (matmuls, exp, sums) runs in float32. Arguments are checked
  and cast in :mod:`.sdpa_problem`.
* Problems whose scores ``[H, Sq, Skv]`` of one batch element fit in :data:`TILE_BYTES` take
  the untiled path (:mod:`.sdpa_small`): a dozen batched NumPy calls on whole score arrays,
  several batch elements at once, masks applied whole.
* Larger problems take the tiled path (:mod:`.sdpa_tiled`): blocks of query rows (and, in the
  backward, of keys) of about :data:`TILE_BYTES`, so the extra memory is ``O(block × Skv)``;
  only the key columns a block can see are touched, and only the band's edges are masked.
* Passing ``block_q`` smaller than ``Sq`` always takes the tiled path.
* :func:`presized_backward` does the checks once for callers that run one small shape often
  with arrays they have already checked (the NumPy engine's plans): a tiny backward then costs
  little more than its dozen NumPy calls.

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

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from . import sdpa_small, sdpa_tiled
from .sdpa_problem import (
    TILE_BYTES,
    Array,
    Backward,
    Problem,
    alibi_slopes,
    prepare,
    prepare_backward,
)

__all__ = ["TILE_BYTES", "alibi_slopes", "presized_backward", "sdpa_backward", "sdpa_forward"]


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
    p = prepare(
        q,
        k,
        v,
        scale,
        bias,
        alibi,
        bottom_right,
        left_bound,
        right_bound,
        seq_len_q,
        seq_len_kv,
        dropout_mask,
        dropout_scale,
        compute_dtype,
        block_q,
    )
    return sdpa_small.forward(p, p.per_call) if p.per_call else sdpa_tiled.forward(p)


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
    compute_dbias: bool | None = None,
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
        compute_dbias: False: return no dBias (saves its reduction); True: require one (from
            ``dbias_shape`` or ``bias``); None: dBias exactly when a bias or dbias_shape is given.

    Returns:
        ``(dq [B,H,Sq,D], dk [B,Hk,Skv,D], dv [B,Hv,Skv,Dv], dbias or None)``, all in
        ``compute_dtype``; padded or fully masked rows and columns have exactly zero gradients.

    Raises:
        ValueError: Shapes that do not fit together, an unsupported compute dtype, or
            ``compute_dbias=True`` with neither bias nor dbias_shape.

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
    p = prepare(
        q,
        k,
        v,
        scale,
        bias,
        alibi,
        bottom_right,
        left_bound,
        right_bound,
        seq_len_q,
        seq_len_kv,
        dropout_mask,
        dropout_scale,
        compute_dtype,
        block_q,
    )
    g = prepare_backward(
        p, o, do, stats, None if bias is None else np.shape(bias), dbias_shape, compute_dbias
    )
    return sdpa_small.backward(p, g, p.per_call) if p.per_call else sdpa_tiled.backward(p, g)


def presized_backward(
    q_shape: tuple[int, ...],
    k_shape: tuple[int, ...],
    v_shape: tuple[int, ...],
    *,
    scale: float,
    alibi: bool = False,
    bottom_right: bool = False,
    left_bound: int | None = None,
    right_bound: int | None = None,
    compute_dtype: npt.DTypeLike = np.float32,
) -> Callable[[Array, Array, Array, Array, Array, Array], tuple[Array, Array, Array, None]] | None:
    """:func:`sdpa_backward` with its checks done once, for callers that run one shape often.

    For a problem without bias, dBias, dropout or padding whose arrays will always be C-contiguous
    NumPy arrays of ``compute_dtype`` with these shapes (the NumPy engine's plans, once the
    variant pack has been checked against the graph): checks the shapes and the keyword arguments
    now and returns ``run(q, k, v, o, do, stats) -> (dq, dk, dv, None)``, which skips them (a
    ``−inf`` in ``stats`` is still read as ``+inf``). None when the problem is too large for the
    untiled path; the full function is then the way.

    Raises:
        ValueError: As :func:`sdpa_backward` would for these shapes and arguments.

    Example:
        >>> import numpy as np
        >>> x = np.ones((1, 2, 4, 8), dtype=np.float32)
        >>> run = presized_backward(x.shape, x.shape, x.shape, scale=0.5, right_bound=0)
        >>> stats = sdpa_forward(x, x, x, scale=0.5, right_bound=0)[1]
        >>> [g.shape for g in run(x, x, x, x, x, stats)[:3]]
        [(1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)]
    """
    like_q, like_k, like_v = (np.empty(s, dtype=compute_dtype) for s in (q_shape, k_shape, v_shape))
    p = prepare(like_q, like_k, like_v, scale, None, alibi, bottom_right, left_bound, right_bound,
                None, None, None, 1.0, compute_dtype, None)  # fmt: skip
    per_call, ct = p.per_call, p.ct
    if not per_call:
        return None
    b, h, sq, _ = p.q.shape
    stats_shape, dv = (b, h, sq, 1), p.v.shape[3]
    prepare_backward(p, np.empty((b, h, sq, dv), ct), np.empty((b, h, sq, dv), ct),
                     np.empty(stats_shape, ct), None, None, False)  # fmt: skip
    flags = (p.alibi, p.bottom_right, p.left_bound, p.right_bound)
    add = sdpa_small.additive(p)  # ALiBi and the band: fixed by the shapes and flags
    whole = per_call >= b

    def run(
        q: Array, k: Array, v: Array, o: Array, do: Array, stats: Array
    ) -> tuple[Array, Array, Array, None]:
        lse = stats if stats.shape == stats_shape else stats.reshape(stats_shape)
        if not lse.flat[lse.argmin()] > -np.inf:  # -inf (or NaN): a private +inf copy
            lse = np.where(np.isneginf(lse), ct.type(np.inf), lse)
        if whole:  # the common case: one untiled call for the whole problem
            dq, dk, dv, _ = sdpa_small.backward_block(
                p, q, k, v, o, do, lse, None, None, add, None, None
            )
        else:
            call = Problem(
                q, k, v, p.scale, ct, None, None, 1.0, *flags, None, None, None, per_call
            )
            dq, dk, dv, _ = sdpa_small.backward(call, Backward(o, do, lse, None), per_call)
        return dq, dk, dv, None

    return run
