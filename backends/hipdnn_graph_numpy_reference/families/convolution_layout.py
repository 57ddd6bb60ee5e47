"""The geometry of a convolution and the memory layout of its arrays (shared by the im2col
path, :mod:`.convolution_math`, and the depthwise one, :mod:`.convolution_depthwise`).

Example:
    >>> import numpy as np
    >>> g = Geometry.of([5], [3], pre=[1], post=[1], stride=[2], dilation=[1])
    >>> g.out, g.reach, g.tap([2])
    ((3,), (7,), (slice(2, 7, 2),))
    >>> x = np.ones((1, 2, 5, 4)).transpose(0, 3, 1, 2)  # [N, C=4, 5, 2] stored channels last
    >>> channels_last(x), channels_last(np.ones((1, 4, 5, 2)))
    (True, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

__all__ = ["Array", "Geometry", "channels_last", "padded", "zeros_like_layout"]

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
        """The padded input extent, ``pre + size + post``."""
        return tuple(a + n + b for a, n, b in zip(self.pre, self.size, self.post, strict=True))

    @cached_property
    def reach(self) -> tuple[int, ...]:
        """How far into the padded extent the taps read: ``(out − 1)·stride +
        dilation·(kernel − 1) + 1`` (at most :attr:`padded`)."""
        return tuple(
            (o - 1) * s + d * (k - 1) + 1
            for o, s, k, d in zip(self.out, self.stride, self.kernel, self.dilation, strict=True)
        )

    @cached_property
    def taps(self) -> int:
        """The number of kernel positions."""
        return int(np.prod(self.kernel))

    def interior(self) -> tuple[slice, ...]:
        """Where the unpadded input sits in the padded extent."""
        return tuple(slice(a, a + n) for a, n in zip(self.pre, self.size, strict=True))

    def tap(self, index: Sequence[int]) -> tuple[slice, ...]:
        """The padded positions kernel tap ``index`` reads, one per output position."""
        return tuple(
            slice(r * d, r * d + (o - 1) * s + 1, s)
            for r, d, o, s in zip(index, self.dilation, self.out, self.stride, strict=True)
        )


def channels_last(a: Array) -> bool:
    """Whether ``a [N, C, *spatial]`` keeps its channels innermost in memory (``[N, *spatial,
    C]``, as NHWC); decides the order of the gathered windows and of the results."""
    return a.ndim > 2 and a.shape[1] > 1 and a.strides[1] < a.strides[-1]


def zeros_like_layout(shape: Sequence[int], last: bool, dtype: Any) -> Array:
    """Zeros of logical ``[N, C, *spatial]`` shape, channels innermost in memory if ``last``."""
    if not last:
        return np.zeros(shape, dtype=dtype)
    memory = np.zeros((shape[0], *shape[2:], shape[1]), dtype=dtype)
    return memory.transpose(0, memory.ndim - 1, *range(1, memory.ndim - 1))


def padded(x: Array, g: Geometry, last: bool | None = None) -> Array:
    """``x [N, C, *in]`` zero-padded to ``[N, C, *reach]``, the extent the taps read, in
    ``x``'s layout (or channels last if ``last``, first if ``not last``): ``x`` itself (or a
    slice of it) when no padding is read and the layout is already the one asked for."""
    last = channels_last(x) if last is None else last
    if (
        not any(g.pre)
        and all(r <= n for r, n in zip(g.reach, g.size, strict=True))
        and last == channels_last(x)
    ):
        return x[(slice(None), slice(None), *(slice(0, r) for r in g.reach))]
    xp = zeros_like_layout((*x.shape[:2], *g.reach), last, x.dtype)
    # the inputs the taps read (none of a dim whose taps all fall in its padding before)
    kept = [max(0, min(n, r - a)) for n, r, a in zip(g.size, g.reach, g.pre, strict=True)]
    src = tuple(slice(0, e) for e in kept)
    dst = tuple(slice(a, a + e) for a, e in zip(g.pre, kept, strict=True))
    xp[(slice(None), slice(None), *dst)] = x[(slice(None), slice(None), *src)]
    return xp
