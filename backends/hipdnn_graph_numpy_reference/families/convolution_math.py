"""Convolution forward, data gradient and weight gradient on NumPy arrays: the definition of the
math, in 1-3 (or more) spatial dims, with groups.

Shapes (NC[spatial] logical order, whatever the arrays' strides): ``x [N, C, *in]``,
``w [K, C/G, *kernel]``, ``y``/``dy [N, K, *out]``; the group count ``G = C / (C/G)`` (hipDNN
infers it from the channel counts), ``K/G`` output channels per group. Per spatial dim ``i``,
with ``pre_i`` the padding before, ``s_i`` the stride and ``d_i`` the dilation, cross-correlation
is ::

    y[n, g·K/G + k, o] = Σ_{c < C/G, r} x[n, g·C/G + c, o·s + r·d − pre] · w[g·K/G + k, c, r]

where ``x`` reads 0 outside ``[0, in)`` (the padding), ``o`` runs over the output positions and
``r`` over the kernel's. True convolution is the same with the kernel flipped along every
spatial dim (``w[..., kernel − 1 − r]``). The data gradient ``dx`` is the adjoint of ``x ↦ y``
(each ``dy`` element sends ``dy · w`` back to the inputs that made it; inputs no output read get
0), the weight gradient ``dw`` the adjoint of ``w ↦ y``.

Implementation (im2col): the input is zero-padded once and its windows gathered into one matrix
per group whose inner dim is ``C/G · kernel taps`` (:func:`_windows`), so that each operation is
a few large matrix products per batch chunk (a batch whose gathered windows would pass
:data:`CHUNK_BYTES` runs in chunks of batch elements, so the extra memory stays bounded). The
gather follows the memory layout of the arrays (:func:`channels_last`): with channels first the
windows of each batch element are ``[C/G · taps, out]`` matrices and ``w · windows`` lands in
``[N, K, *out]`` order; with channels last they are ``[N · out, taps · C/G]`` rows and
``windows · wᵀ`` lands in ``[N, *out, K]`` order, so the result is already in the caller's
layout. A 1×1 unit-stride unpadded convolution gathers nothing (its windows are the input).
When the first spatial dim has a unit stride it is not gathered (:func:`_lead`): each of its
kernel taps reads the gathered rows shifted by ``tap·dilation`` (one product per tap, summed),
which gathers ``kernel[0]`` times less. The data gradient with unit strides (and paddings within
the kernel's reach) is a correlation of ``dy`` with the flipped filter; otherwise ``wᵀ · dy``
gives every tap's contribution in one product, added back where the tap read (col2im). The
weight gradient is ``dy · windowsᵀ``, products whose inner dim is ``N · out``.

A depthwise convolution on channels-last data (``C/G = 1``, ``K = C``) has no product worth a
matrix, its im2col matrices being a column wide: it runs tap by tap
(:mod:`.convolution_depthwise`).

Example:
    >>> import numpy as np
    >>> x = np.arange(5.0).reshape(1, 1, 5)
    >>> w = np.array([[[1.0, 0.0, -1.0]]])
    >>> g = Geometry.of([5], [3], pre=[1], post=[1], stride=[1], dilation=[1])
    >>> correlate(x, w, g).tolist()
    [[[-1.0, -2.0, -2.0, -2.0, 3.0]]]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .convolution_depthwise import (
    depthwise_correlate,
    depthwise_data_gradient,
    depthwise_weight_gradient,
    is_depthwise,
)
from .convolution_layout import Array, Geometry, channels_last, padded, zeros_like_layout

__all__ = [
    "Geometry",
    "channels_last",
    "correlate",
    "correlate_data_gradient",
    "correlate_weight_gradient",
]


#: the most bytes the gathered windows of one batch chunk should take: larger batches run in
#: chunks of batch elements, so that the extra memory stays bounded
CHUNK_BYTES = 256 * 2**20


def _batch_chunks(n: int, g: Geometry, channels: int, itemsize: int) -> list[slice]:
    """Slices of the batch whose padded input and gathered windows fit in
    :data:`CHUNK_BYTES`; one batch element at least."""
    whole, _, extent, _ = _lead(g)
    gathered = extent * int(np.prod(g.out[whole:])) * int(np.prod(g.kernel[whole:]))
    cells = int(np.prod(g.padded)) + max(gathered, int(np.prod(g.out)) * g.taps)
    step = max(1, CHUNK_BYTES // max(cells * channels * itemsize, 1))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _by_batch_chunk(run: Any, first: Array, *rest: Any, g: Geometry, channels: int) -> Array:
    """``run(first[chunk], *rest)`` over batch chunks of ``first``, joined on the batch (in
    the layout of the first chunk's result)."""
    chunks = _batch_chunks(first.shape[0], g, channels, first.itemsize)
    if len(chunks) == 1:
        result: Array = run(first, *rest)
        return result
    parts = [run(first[c], *rest) for c in chunks]
    joined: Array = np.empty_like(parts[0], shape=(first.shape[0], *parts[0].shape[1:]))
    for c, part in zip(chunks, parts, strict=True):
        joined[c] = part
    return joined


def _windows(xp: Array, g: Geometry, groups: int, whole: int = 0) -> Array:
    """The windows of the padded input ``xp [N, C, *reach]`` as a read-only view
    ``[N, G, C/G, *kernel, *out]`` whose element at ``(n, g, c, r, o)`` is
    ``xp[n, g·C/G + c, o·stride + r·dilation]`` (any order of it copied is an im2col).

    The first ``whole`` spatial dims are kept whole instead (their kernel dims left out, their
    output dims replaced by the padded positions ``[0, reach)``): ``[N, G, C/G,
    *kernel[whole:], *reach[:whole], *out[whole:]]``.
    """
    n, c = xp.shape[:2]
    sn, sc, *spatial = xp.strides
    steps = zip(spatial, g.stride, g.dilation, strict=True)
    shape = (
        n, groups, c // groups, *g.kernel[whole:], *g.reach[:whole], *g.out[whole:],
    )  # fmt: skip
    strides = (
        sn, sc * (c // groups), sc,
        *(st * d for st, _, d in list(steps)[whole:]),
        *spatial[:whole],
        *(st * s for st, s in zip(spatial[whole:], g.stride[whole:], strict=True)),
    )  # fmt: skip
    return as_strided(xp, shape, strides, writeable=False)


def _gathered(windows: Array, order: Sequence[int], shape: Sequence[int]) -> Array:
    """``windows`` with its axes in ``order``, as an array of ``shape`` whose last two dims are
    matrices BLAS reads as they are: a view of the input when the windows already are such
    matrices (a 1×1 unit-stride unpadded convolution's), else a contiguous copy (the im2col)."""
    view = windows.transpose(order).reshape(shape)  # a copy when no view has that shape
    rows, items = view.strides[-2:]
    if items == view.itemsize and rows >= view.shape[-1] * items and rows % items == 0:
        return view
    return np.ascontiguousarray(view)


def _axes(g: Geometry, whole: int = 0) -> tuple[list[int], list[int]]:
    """The axes of the kernel dims and of the output (or whole) dims in :func:`_windows`'
    view."""
    d = len(g.kernel)
    return list(range(3, 3 + d - whole)), list(range(3 + d - whole, 3 + 2 * d - whole))


def _lead(g: Geometry) -> tuple[int, range, int, int]:
    """How the first spatial dim is treated: ``(whole, taps, extent, rows)``. With a unit
    stride it is kept whole (``whole = 1``): its kernel taps (``taps``) read the gathered rows
    shifted by ``tap·dilation``, the gathered windows span ``extent = reach[0]`` rows of it and
    the output ``rows = out[0]``. Otherwise it is gathered like the others (``whole = 0``, one
    pass, ``extent = rows = 1``)."""
    if g.stride[0] == 1:
        return 1, range(g.kernel[0]), g.reach[0], g.out[0]
    return 0, range(1), 1, 1


def correlate(x: Array, w: Array, g: Geometry) -> Array:
    """Cross-correlation ``y [N, K, *out]`` of ``x [N, C, *in]`` with ``w [K, C/G, *kernel]``,
    in the arrays' common dtype and ``x``'s layout (channels first or last)."""
    if is_depthwise(x, w.shape[0], w.shape[1]):
        return depthwise_correlate(x, w, g)
    return _by_batch_chunk(lambda xs: _correlate(xs, w, g), x, g=g, channels=x.shape[1])


def _correlate(x: Array, w: Array, g: Geometry) -> Array:
    """:func:`correlate` of one batch chunk: per group, the filter times the im2col matrix.

    With a unit stride in the first spatial dim, that dim is not gathered: its kernel taps
    ``r`` read the gathered rows shifted by ``r·dilation``, one product per tap (summed), which
    gathers ``kernel[0]`` times less. With channels last, the batch is flattened into that dim
    (each element spans ``reach[0]`` rows), so that each tap's rows for the whole batch are one
    matrix; the rows between two batch elements are computed too, and dropped.
    """
    n, c = x.shape[:2]
    k, groups = w.shape[0], c // w.shape[1]
    whole, lead_taps, extent, rows = _lead(g)
    kernel, spread = _axes(g, whole)
    windows = _windows(padded(x, g), g, groups, whole)
    per = int(np.prod(g.out[whole:]))  # output positions per lead row
    depth = c // groups * int(np.prod(g.kernel[whole:]))
    dtype = np.result_type(x, w)
    last = channels_last(x)
    if not last:
        # per batch element and group: [K/G, C/G·taps] · [C/G·taps, rows·per] -> [N, K, *out]
        cols = _gathered(windows, [0, 1, 2, *kernel, *spread], (n, groups, depth, extent * per))
        y = np.empty((n, groups, k // groups, rows * per), dtype=dtype)
        span = rows * per
    else:
        # per group: [rows of the flattened batch, taps·C/G] · [taps·C/G, K/G] -> [N, *out, K]
        cols = _gathered(windows, [1, 0, *spread, *kernel, 2], (groups, n * extent * per, depth))
        y_rows = np.empty((n * extent * per, groups, k // groups), dtype=dtype)
        span = ((n - 1) * extent + rows) * per
        y = y_rows[:span].swapaxes(0, 1)
    part = np.empty_like(y) if len(lead_taps) > 1 else y
    for r0 in lead_taps:
        w_tap = w[:, :, r0 : r0 + 1] if whole else w
        start = r0 * g.dilation[0] * per
        if not last:
            a, b = w_tap.reshape(groups, k // groups, depth), cols[..., start : start + span]
        else:
            # [G, taps·C/G, K/G], contiguous (the orientation BLAS runs fastest here)
            by_row = w_tap.reshape(groups, k // groups, c // groups, -1).transpose(0, 3, 2, 1)
            a = cols[:, start : start + span]
            b = np.ascontiguousarray(by_row).reshape(groups, depth, k // groups)
        np.matmul(a, b, out=y if r0 == 0 else part)
        if r0 > 0:
            y += part
    if not last:
        return y.reshape(n, k, *g.out)
    y_nhwc = y_rows.reshape(n, extent, -1)[:, :rows].reshape(n, *g.out, k)
    return y_nhwc.transpose(0, y_nhwc.ndim - 1, *range(1, y_nhwc.ndim - 1))


def correlate_data_gradient(dy: Array, w: Array, g: Geometry, channels: int) -> Array:
    """``dx [N, channels, *in]``, the gradient of :func:`correlate`'s input from
    ``dy [N, K, *out]`` and ``w [K, C/G, *kernel]``, in the arrays' common dtype and ``dy``'s
    layout (channels last also when the last dim's stride is above 1).

    With unit strides (and paddings within the kernel's reach) it is itself a cross-correlation:
    of ``dy``, padded by ``dilation·(kernel − 1) − pre`` before and ``… − post`` after, with the
    flipped filter whose input and output channels trade places within each group. Otherwise
    ``wᵀ · dy`` gives every tap's contribution, added back where the tap read (col2im).
    """
    transposed = _transposed_geometry(g)
    if transposed is not None:
        return correlate(dy, _transposed_filter(w, channels), transposed)
    if is_depthwise(dy, channels, w.shape[1]):
        return depthwise_data_gradient(dy, w, g)
    return _by_batch_chunk(
        lambda dys: _scatter_data_gradient(dys, w, g, channels), dy, g=g, channels=channels
    )


def _transposed_geometry(g: Geometry) -> Geometry | None:
    """The geometry of the data gradient as a cross-correlation over ``dy``, or ``None`` when
    it is not one (a stride above 1, or a padding past the kernel's reach)."""
    reach = [d * (k - 1) for k, d in zip(g.kernel, g.dilation, strict=True)]
    pre = [r - a for r, a in zip(reach, g.pre, strict=True)]
    post = [r - b for r, b in zip(reach, g.post, strict=True)]
    if any(s != 1 for s in g.stride) or min(pre + post) < 0:
        return None
    return Geometry.of(g.out, g.kernel, pre=pre, post=post, stride=g.stride, dilation=g.dilation)


def _transposed_filter(w: Array, channels: int) -> Array:
    """``w [K, C/G, *kernel]`` as the filter of the transposed correlation: ``[C, K/G, *kernel]``,
    flipped along every spatial dim."""
    k, per_group = w.shape[:2]
    groups = channels // per_group
    kernel = w.shape[2:]
    swapped = w.reshape(groups, k // groups, per_group, *kernel).swapaxes(1, 2)
    flip: tuple[slice, ...] = (slice(None),) * 3 + (slice(None, None, -1),) * len(kernel)
    flipped = swapped[flip]
    # contiguous: the products read it per tap, and BLAS takes negative strides slowly
    return np.ascontiguousarray(flipped.reshape(channels, k // groups, *kernel))


def _scatters_channels_last(a: Array, g: Geometry) -> bool:
    """Whether the gradients' gather or scatter over ``a`` runs channels-last: when ``a`` is,
    or when the last spatial dim has a stride above 1 (channels first, each tap would then move
    single elements a stride apart; channels last, whole runs of channels)."""
    return channels_last(a) or g.stride[-1] > 1


def _scatter_data_gradient(dy: Array, w: Array, g: Geometry, channels: int) -> Array:
    """The data gradient by col2im: ``cols = wᵀ · dy`` holds every tap's contribution
    ``[N, G, C/G, *kernel, *out]``, each tap's part added where that tap read."""
    n, k = dy.shape[:2]
    per_group = w.shape[1]
    groups = channels // per_group
    m, depth = int(np.prod(g.out)), per_group * g.taps
    last = _scatters_channels_last(dy, g)
    if not last:
        # per batch element and group: [C/G·taps, K/G] · [K/G, out]
        dy_cols = dy.reshape(n, groups, k // groups, m)
        filters = w.reshape(groups, k // groups, depth).swapaxes(1, 2)
        cols = np.matmul(filters, dy_cols).reshape(n, groups, per_group, *g.kernel, *g.out)
    else:
        # per group: [N·out, K/G] · [K/G, taps·C/G]
        dy_rows = dy.transpose(0, *range(2, dy.ndim), 1).reshape(n * m, groups, k // groups)
        taps_last = w.reshape(groups, k // groups, per_group, g.taps).swapaxes(2, 3)
        filters = taps_last.reshape(groups, k // groups, depth)
        rows = np.matmul(dy_rows.swapaxes(0, 1), filters)
        rows = rows.reshape(groups, n, *g.out, *g.kernel, per_group)
        # [G, N, *out, *kernel, C/G] viewed as [N, G, C/G, *kernel, *out]
        d = len(g.kernel)
        out_axes, kernel_axes = range(2, 2 + d), range(2 + d, 2 + 2 * d)
        cols = rows.transpose(1, 0, rows.ndim - 1, *kernel_axes, *out_axes)
    dxp = zeros_like_layout((n, channels, *g.padded), last, cols.dtype)
    dxp_groups = dxp.reshape(n, groups, per_group, *g.padded)
    every = (slice(None),) * 3
    for index in itertools.product(*(range(r) for r in g.kernel)):
        dxp_groups[(*every, *g.tap(index))] += cols[(*every, *index)]
    return dxp[(slice(None), slice(None), *g.interior())]


def correlate_weight_gradient(dy: Array, x: Array, g: Geometry, per_group: int) -> Array:
    """``dw [K, per_group, *kernel]``, the gradient of :func:`correlate`'s filter from
    ``dy [N, K, *out]`` and ``x [N, C, *in]``, in the arrays' common dtype: per group, ``dy``
    times the im2col matrix of ``x``, one matrix product whose inner dim is ``N · out`` (per
    batch chunk, summed)."""
    if is_depthwise(x, dy.shape[1], per_group):
        return depthwise_weight_gradient(dy, x, g)
    chunks = _batch_chunks(x.shape[0], g, x.shape[1], x.itemsize)
    dw = _weight_gradient(dy[chunks[0]], x[chunks[0]], g, per_group)
    for c in chunks[1:]:
        dw += _weight_gradient(dy[c], x[c], g, per_group)
    return dw


def _weight_gradient(dy: Array, x: Array, g: Geometry, per_group: int) -> Array:
    """:func:`correlate_weight_gradient` of one batch chunk (a new array).

    As in :func:`_correlate`, a first spatial dim of unit stride is not gathered: the batch is
    flattened into it, ``dy`` is spread over the same rows (zeros on the rows between two batch
    elements, so that they add nothing) and each tap of that dim is one product of ``dy`` with
    the gathered rows shifted by ``tap·dilation``.
    """
    n, k = dy.shape[:2]
    c = x.shape[1]
    groups = c // per_group
    whole, lead_taps, extent, rows = _lead(g)
    kernel, spread = _axes(g, whole)
    last = _scatters_channels_last(x, g)
    windows = _windows(padded(x, g, last), g, groups, whole)
    per = int(np.prod(g.out[whole:]))  # output positions per lead row
    depth = per_group * int(np.prod(g.kernel[whole:]))
    span = ((n - 1) * extent + rows) * per  # flattened rows up to the last output row
    # dy [N, K, *out] on the flattened rows: [N, extent, per, G, K/G] (channels last) or
    # [G, K/G, N, extent, per], zero where no output row is
    dy_parts = dy.reshape(n, groups, k // groups, rows, per)
    order = (0, 3, 4, 1, 2) if last else (1, 2, 0, 3, 4)
    dtype = np.result_type(dy, x)
    fill = np.zeros if extent > rows else np.empty
    dy_spread = fill([(n, groups, k // groups, extent, per)[i] for i in order], dtype)
    output_rows = tuple(slice(0, rows) if i == 3 else slice(None) for i in order)
    dy_spread[output_rows] = dy_parts.transpose(order)
    dw = np.empty((groups, k // groups, per_group, len(lead_taps), *g.kernel[whole:]), dtype)
    if not last:
        # per group and tap: [K/G, rows] · [rows, C/G·taps]
        cols = _gathered(windows, [1, 2, *kernel, 0, *spread], (groups, depth, n * extent * per))
        dy_rows = dy_spread.reshape(groups, k // groups, -1)[..., :span]
    else:
        # per group and tap: [taps·C/G, rows] · [rows, K/G] (OpenBLAS threads stall far less
        # on this orientation than on dyᵀ · windows when the machine is busy)
        cols = _gathered(windows, [1, 0, *spread, *kernel, 2], (groups, n * extent * per, depth))
        dy_rows = dy_spread.reshape(-1, groups, k // groups)[:span].swapaxes(0, 1)
    for r0 in lead_taps:
        start = r0 * g.dilation[0] * per
        if not last:
            part = np.matmul(dy_rows, cols[..., start : start + span].swapaxes(1, 2))
        else:
            by_tap = np.matmul(cols[:, start : start + span].swapaxes(1, 2), dy_rows)
            by_tap = by_tap.reshape(groups, -1, per_group, k // groups)
            part = by_tap.transpose(0, 3, 2, 1)  # [G, K/G, C/G, taps]
        dw[:, :, :, r0] = part.reshape(groups, k // groups, per_group, *g.kernel[whole:])
    return dw.reshape(k, per_group, *g.kernel)
