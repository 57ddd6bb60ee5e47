"""Depthwise convolution on channels-last data, tap by tap (see :mod:`.convolution_math`).

A depthwise convolution (one input channel per group and one filter per channel: ``C/G = 1``,
``K = C``) has no product worth a matrix: its im2col matrices are a column wide. On
channels-last data it runs tap by tap instead: each kernel tap multiplies the input positions
it reads by its per-channel weight and adds that in, in the data's own layout; the data
gradient of a stride above 1 adds ``dy`` times each tap's weight back where the tap read, and
the weight gradient is, per tap, the per-channel sum of ``dy`` times those positions.

Example:
    >>> import numpy as np
    >>> x = np.arange(8.0).reshape(1, 4, 2).transpose(0, 2, 1)  # [N, C=2, 4], channels last
    >>> w = np.array([[[1.0, -1.0]], [[0.5, 0.5]]])  # [C, 1, 2]
    >>> g = Geometry.of([4], [2], pre=[0], post=[0], stride=[1], dilation=[1])
    >>> is_depthwise(x, 2, 1)
    True
    >>> depthwise_correlate(x, w, g).tolist()
    [[[-2.0, -2.0, -2.0], [2.0, 4.0, 6.0]]]
"""

from __future__ import annotations

import itertools

import numpy as np

from .convolution_layout import Array, Geometry, channels_last, padded, zeros_like_layout

__all__ = [
    "depthwise_correlate",
    "depthwise_data_gradient",
    "depthwise_weight_gradient",
    "is_depthwise",
    "tap_indices",
]


def is_depthwise(x: Array, k: int, per_group: int) -> bool:
    """Whether a convolution of ``x [N, C, *in]`` to ``K = k`` channels with ``per_group``
    input channels per group is depthwise (``C/G = 1``, ``K = C``) on channels-last data: the
    case that runs tap by tap."""
    return per_group == 1 and k == x.shape[1] and channels_last(x)


def tap_indices(g: Geometry) -> itertools.product[tuple[int, ...]]:
    """Every kernel tap's index, in row-major order."""
    return itertools.product(*(range(k) for k in g.kernel))


def depthwise_correlate(x: Array, w: Array, g: Geometry) -> Array:
    """The correlation of ``x [N, C, *in]`` with a depthwise filter ``w [C, 1, *kernel]``, tap
    by tap: ``y = Σ_r w[:, 0, r] · x[tap r's positions]``, each channel by its own weight, in
    ``x``'s layout."""
    xp = padded(x, g)
    per_channel = (1, x.shape[1], *(1 for _ in g.kernel))
    y: Array | None = None
    part: Array | None = None
    for index in tap_indices(g):
        reads = xp[(slice(None), slice(None), *g.tap(index))]
        tap: tuple[slice | int, ...] = (slice(None), 0, *index)
        weight = w[tap].reshape(per_channel)
        if y is None:
            y = np.multiply(reads, weight)  # laid out as the reads: channels last
            part = np.empty_like(y)
        else:
            np.multiply(reads, weight, out=part)
            y += part
    assert y is not None  # a kernel has one tap at least
    return y


def depthwise_data_gradient(dy: Array, w: Array, g: Geometry) -> Array:
    """The data gradient of a depthwise convolution (:func:`is_depthwise`) that is no
    correlation (a stride above 1), tap by tap: each tap adds ``dy · w[:, 0, r]`` to the padded
    positions it read, in ``dy``'s layout."""
    n, c = dy.shape[:2]
    dtype = np.result_type(dy, w)
    dxp = zeros_like_layout((n, c, *g.padded), True, dtype)
    part = np.empty_like(dy, dtype=dtype)
    per_channel = (1, c, *(1 for _ in g.kernel))
    for index in tap_indices(g):
        tap: tuple[slice | int, ...] = (slice(None), 0, *index)
        np.multiply(dy, w[tap].reshape(per_channel), out=part)
        dxp[(slice(None), slice(None), *g.tap(index))] += part
    return dxp[(slice(None), slice(None), *g.interior())]


def depthwise_weight_gradient(dy: Array, x: Array, g: Geometry) -> Array:
    """The weight gradient ``dw [C, 1, *kernel]`` of a depthwise convolution
    (:func:`is_depthwise`), tap by tap: ``dw[c, 0, r] = Σ_{n, o} dy[n, c, o] · x[n, c, tap r's
    position of o]``."""
    xp = padded(x, g)
    spatial = "hwdefgijklm"[: len(g.kernel)]
    per_channel = f"nc{spatial},nc{spatial}->c"
    dw = np.empty((x.shape[1], 1, *g.kernel), dtype=np.result_type(dy, x))
    for index in tap_indices(g):
        reads = xp[(slice(None), slice(None), *g.tap(index))]
        tap: tuple[slice | int, ...] = (slice(None), 0, *index)
        dw[tap] = np.einsum(per_channel, dy, reads)
    return dw
