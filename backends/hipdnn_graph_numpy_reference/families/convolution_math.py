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

Implementation: everything runs channels-last (``[N, *spatial, C]``) so that channels are the
contiguous inner dim of each matrix product, and each product spans the whole batch (few, large
BLAS calls; a batch whose gathered windows would pass :data:`CHUNK_BYTES` runs in chunks of
batch elements). The forward pads the input once and gathers the windows over every kernel dim but
the first (im2col over those dims); with the batch flattened into the first padded dim, each tap
of the first kernel dim reads all its rows as one strided view of that array, one matrix product
per tap. The weight gradient gathers the windows over every kernel dim and takes one product.
The data gradient with unit strides is a correlation of ``dy`` with the flipped filter;
otherwise it scatters ``dy · wᵀ`` back tap by tap (col2im). Groups are a batch dim of the
products.

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
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["Geometry", "correlate", "correlate_data_gradient", "correlate_weight_gradient"]

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Geometry:
    """Per spatial dim: input, kernel and output sizes, paddings, stride and dilation."""

    size: tuple[int, ...]
    kernel: tuple[int, ...]
    out: tuple[int, ...]
    pre: tuple[int, ...]
    post: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]

    @classmethod
    def of(
        cls,
        size: Sequence[int],
        kernel: Sequence[int],
        *,
        pre: Sequence[int],
        post: Sequence[int],
        stride: Sequence[int],
        dilation: Sequence[int],
    ) -> Geometry:
        """The geometry of a convolution of inputs ``size`` by a ``kernel``; the output sizes
        follow ``(size + pre + post − (dilation·(kernel − 1) + 1)) / stride + 1``.

        Raises:
            ValueError: when the parameters do not give a positive output size.
        """
        out = []
        for n, k, a, b, s, d in zip(size, kernel, pre, post, stride, dilation, strict=True):
            reach = n + a + b - (d * (k - 1) + 1)
            if reach < 0 or s < 1 or d < 1 or a < 0 or b < 0:
                raise ValueError("convolution parameters give no output")
            out.append(reach // s + 1)
        return cls(
            tuple(size), tuple(kernel), tuple(out), tuple(pre), tuple(post), tuple(stride),
            tuple(dilation),
        )  # fmt: skip

    @cached_property
    def padded(self) -> tuple[int, ...]:
        """The padded input extent every tap of every output reads within."""
        return tuple(
            max(a + n + b, (o - 1) * s + d * (k - 1) + 1)
            for n, k, o, a, b, s, d in zip(
                self.size, self.kernel, self.out, self.pre, self.post, self.stride, self.dilation,
                strict=True,
            )
        )  # fmt: skip

    @cached_property
    def rows(self) -> int:
        """Strides of the first dim each batch element spans once its padded extent is rounded
        up to a whole number of strides (so that the batch can be flattened into that dim)."""
        return -(-self.padded[0] // self.stride[0])

    def interior(self) -> tuple[slice, ...]:
        """Where the unpadded input sits in the padded extent."""
        return tuple(slice(a, a + n) for a, n in zip(self.pre, self.size, strict=True))

    def tap(self, index: Sequence[int]) -> tuple[slice, ...]:
        """The padded positions kernel tap ``index`` reads, one per output position."""
        return tuple(
            slice(r * d, r * d + (o - 1) * s + 1, s)
            for r, d, o, s in zip(index, self.dilation, self.out, self.stride, strict=True)
        )


#: the most bytes the gathered windows of one batch chunk should take: larger batches run in
#: chunks of batch elements, so that the extra memory stays bounded
CHUNK_BYTES = 256 * 2**20


def _channels_last(a: Array) -> Array:
    """``[N, C, *spatial]`` as ``[N, *spatial, C]`` (a view)."""
    return a.transpose(0, *range(2, a.ndim), 1)


def _channels_first(a: Array) -> Array:
    """``[N, *spatial, C]`` as ``[N, C, *spatial]`` (a view)."""
    return a.transpose(0, a.ndim - 1, *range(1, a.ndim - 1))


def _batch_chunks(n: int, g: Geometry, channels: int, itemsize: int) -> list[slice]:
    """Slices of the batch whose gathered windows (at most every kernel tap of the padded
    input) fit in :data:`CHUNK_BYTES`; one batch element at least."""
    per_element = int(np.prod(g.padded)) * int(np.prod(g.kernel)) * channels * itemsize
    step = max(1, CHUNK_BYTES // max(per_element, 1))
    return [slice(i, min(i + step, n)) for i in range(0, n, step)]


def _by_batch_chunk(run: Any, first: Array, *rest: Any, g: Geometry, channels: int) -> Array:
    """``run(first[chunk], *rest)`` over batch chunks of ``first``, joined on the batch."""
    chunks = _batch_chunks(first.shape[0], g, channels, first.itemsize)
    if len(chunks) == 1:
        result: Array = run(first, *rest)
        return result
    return np.concatenate([run(first[c], *rest) for c in chunks], axis=0)


def _padded(x: Array, g: Geometry) -> Array:
    """``x [N, C, *in]`` channels-last, zero-padded to ``[N, rows·stride[0], *padded[1:], C]``
    (a view when there is nothing to pad)."""
    extent = (g.rows * g.stride[0], *g.padded[1:])
    if extent == g.size:
        return _channels_last(x)
    xp = np.zeros((x.shape[0], *extent, x.shape[1]), dtype=x.dtype)
    xp[(slice(None), *g.interior())] = _channels_last(x)
    return xp


def _windows(xp: Array, g: Geometry, first: int) -> Array:
    """The im2col array of the kernel dims from ``first`` on (a copy): ``xp`` with each such
    spatial dim ``i`` split into output and kernel positions, ``[N, …, out_i, …, kernel_i, …,
    C]`` (dims before ``first`` kept whole), whose element at ``(o_i, r_i)`` is ``xp`` at
    ``o_i·stride_i + r_i·dilation_i``."""
    strides = xp.strides
    spatial = range(1, xp.ndim - 1)
    split = [i - 1 >= first for i in spatial]
    shape = [xp.shape[0]]
    steps = [strides[0]]
    for i, gathered in zip(spatial, split, strict=True):
        shape.append(g.out[i - 1] if gathered else xp.shape[i])
        steps.append(strides[i] * g.stride[i - 1] if gathered else strides[i])
    for i, gathered in zip(spatial, split, strict=True):
        if gathered:
            shape.append(g.kernel[i - 1])
            steps.append(strides[i] * g.dilation[i - 1])
    view = as_strided(xp, (*shape, xp.shape[-1]), (*steps, strides[-1]), writeable=False)
    return np.ascontiguousarray(view)


def _by_group(rows: Array, groups: int) -> Array:
    """``[M, …, C]`` input rows (``…`` kernel positions) as ``[G, M, …·C/G]`` matrices."""
    m, c = rows.shape[0], rows.shape[-1]
    split = rows.reshape(m, -1, groups, c // groups)
    return split.transpose(2, 0, 1, 3).reshape(groups, m, -1)


def _filter_by_group(w: Array, groups: int) -> Array:
    """``w [K, C/G, *kernel]`` as ``[G, kernel·C/G, K/G]`` (rows in the order of
    :func:`_by_group`'s columns)."""
    k, per_group = w.shape[:2]
    split = w.reshape(groups, k // groups, per_group, -1)  # [G, K/G, C/G, taps]
    return split.transpose(0, 3, 2, 1).reshape(groups, -1, k // groups)


def correlate(x: Array, w: Array, g: Geometry) -> Array:
    """Cross-correlation ``y [N, K, *out]`` of ``x [N, C, *in]`` with ``w [K, C/G, *kernel]``
    (channels-last strides), in the arrays' common dtype."""
    return _by_batch_chunk(lambda xs: _correlate(xs, w, g), x, g=g, channels=x.shape[1])


def _correlate(x: Array, w: Array, g: Geometry) -> Array:
    """:func:`correlate` of one batch chunk.

    The batch is flattened into the first padded dim (each element spans :attr:`Geometry.rows`
    strides of it): kernel tap ``r`` of that dim then reads every output row of every batch
    element as one strided view, and one matrix product per tap (and group) computes them all.
    The rows between two batch elements are computed too, and dropped.
    """
    n, c = x.shape[:2]
    k, groups = w.shape[0], c // w.shape[1]
    windows = _windows(_padded(x, g), g, first=1)
    flat = windows.reshape(n * g.rows * g.stride[0], -1, c)  # [N·rows·s, rest·taps, C]
    rest = int(np.prod(g.out[1:]))
    count = (n - 1) * g.rows + g.out[0]  # flattened output rows up to the last one kept
    y = np.empty((groups, n * g.rows * rest, k // groups), dtype=np.result_type(x, w))
    head = y[:, : count * rest]
    for r0 in range(g.kernel[0]):
        start, step = r0 * g.dilation[0], g.stride[0]
        rows = flat[start : start + (count - 1) * step + 1 : step]  # [count, rest·taps, C]
        a = _by_group(rows.reshape(count * rest, -1, c), groups)
        b = _filter_by_group(w[:, :, r0 : r0 + 1], groups)
        if r0 == 0:
            np.matmul(a, b, out=head)
        else:
            head += np.matmul(a, b)
    # [G, N·rows·rest, K/G] -> the kept rows [N, *out, G, K/G] -> [N, K, *out]
    kept = y.reshape(groups, n, g.rows, *g.out[1:], k // groups)[:, :, : g.out[0]]
    return _channels_first(np.moveaxis(kept, 0, -2).reshape(n, *g.out, k))


def correlate_data_gradient(dy: Array, w: Array, g: Geometry, channels: int) -> Array:
    """``dx [N, channels, *in]``, the gradient of :func:`correlate`'s input from
    ``dy [N, K, *out]`` and ``w [K, C/G, *kernel]``, in the arrays' common dtype.

    With unit strides (and paddings within the kernel's reach) it is itself a cross-correlation:
    of ``dy``, padded by ``dilation·(kernel − 1) − pre`` before and ``… − post`` after, with the
    flipped filter whose input and output channels trade places within each group. Otherwise
    each tap's ``dy · wᵀ`` is added back where the tap read its inputs (col2im).
    """
    transposed = _transposed_geometry(g)
    if transposed is not None:
        return correlate(dy, _transposed_filter(w, channels), transposed)
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
    return flipped.reshape(channels, k // groups, *kernel)


def _scatter_data_gradient(dy: Array, w: Array, g: Geometry, channels: int) -> Array:
    """The data gradient by col2im: every tap's ``dy · wᵀ`` added where the tap read."""
    n, k = dy.shape[:2]
    per_group = w.shape[1]
    groups = channels // per_group
    # every tap's contribution at once: [G, N·M, K/G] @ [G, K/G, taps·C/G]
    dy_rows = _channels_last(dy).reshape(-1, groups, k // groups).transpose(1, 0, 2)
    w_rows = w.reshape(groups, k // groups, per_group, -1).transpose(0, 1, 3, 2)
    cols = np.matmul(dy_rows, w_rows.reshape(groups, k // groups, -1))
    # [G, N, *out, *kernel, C/G] -> per tap [N, *out, G, C/G]
    cols = cols.reshape(groups, n, *g.out, *g.kernel, per_group)
    spatial = len(g.out)
    dxp = np.zeros((n, *g.padded, groups, per_group), dtype=cols.dtype)
    for index in itertools.product(*(range(r) for r in g.kernel)):
        part = cols[(slice(None), slice(None), *(slice(None),) * spatial, *index)]
        target = dxp[(slice(None), *g.tap(index))]
        target += np.moveaxis(part, 0, -2)
    dx = dxp[(slice(None), *g.interior())].reshape(n, *g.size, channels)
    return _channels_first(dx)


def correlate_weight_gradient(dy: Array, x: Array, g: Geometry, per_group: int) -> Array:
    """``dw [K, per_group, *kernel]``, the gradient of :func:`correlate`'s filter from
    ``dy [N, K, *out]`` and ``x [N, C, *in]``, in the arrays' common dtype: per group, ``dyᵀ``
    times the im2col matrix of ``x`` over every kernel dim, one matrix product (per batch
    chunk, summed)."""
    chunks = _batch_chunks(x.shape[0], g, x.shape[1], x.itemsize)
    dw = _weight_gradient(dy[chunks[0]], x[chunks[0]], g, per_group)
    for c in chunks[1:]:
        dw += _weight_gradient(dy[c], x[c], g, per_group)
    return dw


def _weight_gradient(dy: Array, x: Array, g: Geometry, per_group: int) -> Array:
    """:func:`correlate_weight_gradient` of one batch chunk (a new array)."""
    k = dy.shape[1]
    c = x.shape[1]
    groups = c // per_group
    windows = _windows(_padded(x, g), g, first=0)  # [N, *out, *kernel, C]
    rows = _by_group(windows.reshape(-1, int(np.prod(g.kernel)), c), groups)  # [G, N·M, …]
    dy_rows = _channels_last(dy).reshape(-1, groups, k // groups).transpose(1, 0, 2)
    # rowsᵀ · dy: [G, taps·C/G, K/G] (OpenBLAS threads stall far less on this orientation than
    # on dyᵀ · rows when the machine is busy)
    dw: Array = np.matmul(rows.transpose(0, 2, 1), dy_rows)
    dw = dw.reshape(groups, *g.kernel, per_group, k // groups)
    dw = np.moveaxis(np.moveaxis(dw, -1, 1), -1, 2)  # [G, K/G, C/G, *kernel]
    return np.ascontiguousarray(dw).reshape(k, per_group, *g.kernel)
