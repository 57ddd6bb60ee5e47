"""Memory layouts of tensors: when two stride tuples lay the elements out alike, and a tensor in
the layout (and dtype) a graph declares.

The stride of a dim of size 1 never matters: no index moves along it. Kernels return the same
few layouts call after call, so the answer for each ``(shape, strides, strides)`` is remembered
(a bounded table).

Example:
    >>> same_layout((2, 1, 3), (3, 1, 1), (3, 3, 1))
    True
    >>> same_layout((2, 3), (3, 1), (1, 2))
    False
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["in_layout", "same_layout"]

#: (shape, strides, strides) -> whether they lay the elements out alike; bounded
_SAME: dict[tuple[Any, tuple[int, ...], tuple[int, ...]], bool] = {}
_MAX_REMEMBERED = 4096


def same_layout(shape: Sequence[int], got: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether strides ``got`` lay a tensor of ``shape`` out as ``strides`` do: equal but for
    dims of size 1."""
    if got == strides:
        return True
    key = (tuple(shape), got, strides)
    same = _SAME.get(key)
    if same is None:
        same = all(d == 1 or a == b for d, a, b in zip(shape, got, strides, strict=True))
        if len(_SAME) >= _MAX_REMEMBERED:
            _SAME.clear()
        _SAME[key] = same
    return same


def in_layout(value: Any, strides: tuple[int, ...], dtype: Any = None) -> Any:
    """The torch tensor ``value`` itself when it has ``dtype`` (default: its own) and lays its
    elements out as ``strides`` do (:func:`same_layout`), else a copy in that dtype and layout
    (``copy_``: recorded by autograd like any op).

    Example:
        >>> import torch
        >>> t = torch.zeros(2, 3).t()  # strides (1, 3)
        >>> in_layout(t, (1, 3)) is t, in_layout(t, (2, 1)).stride()
        (True, (2, 1))
    """
    if (dtype is None or value.dtype == dtype) and same_layout(
        value.shape, value.stride(), strides
    ):
        return value
    out = value.new_empty_strided(
        value.shape, strides, dtype=value.dtype if dtype is None else dtype
    )
    return out.copy_(value)
