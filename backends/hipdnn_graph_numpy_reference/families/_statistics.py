"""What the normalization references share: scalar inputs (epsilon, momentum) as compute-type
numbers, per-channel operands, and statistics shaped as their output tensors.

Example:
    >>> import numpy as np
    >>> scalar_input({"EPSILON": np.array([[1e-5]])}, "EPSILON", np.dtype(np.float32)).dtype.name
    'float32'
    >>> per_channel(np.ones((1, 3, 1, 1)), 4, np.dtype(np.float64)).shape
    (1, 3, 1, 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import as_compute, not_supported

__all__ = ["moments", "output_like", "per_channel", "scalar_input"]

Array = np.ndarray[Any, Any]


def scalar_input(inputs: Mapping[str, Any], slot: str, dtype: np.dtype[Any]) -> Any:
    """The one-element input ``slot`` (a pass-by-value number or a one-element array) as a
    compute-type number, as hipDNN casts its scalar parameters to the compute type.

    Raises:
        HipdnnError: ``INVALID_VALUE`` when it holds more than one element.
    """
    value = as_compute(inputs[slot], dtype)
    if value.size != 1:
        raise hg.HipdnnError(
            hg.ErrorCode.INVALID_VALUE, f"{slot} must hold one element, got {value.size}"
        )
    return value.reshape(())[()]


def per_channel(value: Any, ndim: int, dtype: np.dtype[Any]) -> Array:
    """A ``[1, C, 1, ...]`` operand as an array of rank ``ndim`` that broadcasts over
    ``[N, C, ...]`` (channels on axis 1), in the compute type."""
    array = as_compute(value, dtype)
    return array.reshape((1, array.size) + (1,) * (ndim - 2))


def output_like(node: Any, slot: str, value: Array) -> Array:
    """``value`` (statistics kept on the reduced axes) in the dims of the node's output
    ``slot``: the same elements in the same order, reshaped.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` when the tensor holds another number of elements.
    """
    tensor = node.attributes.tensors_by_slot()[slot]
    dims = tuple(tensor.dim)
    if int(np.prod(dims)) != value.size:
        raise not_supported(
            node,
            f"{slot} has dims {list(dims)}, the statistics have {value.size} elements "
            f"(shape {list(value.shape)})",
        )
    return value.reshape(dims)


def moments(x: Array, axes: tuple[int, ...]) -> tuple[Array, Array]:
    """The mean and the biased variance of ``x`` over ``axes`` (kept as 1s), in two passes:
    the variance is the mean of the squared deviations (the definition, and what Welford's
    update computes) rather than ``E[x²] − E[x]²``, which loses precision when the mean is
    large against the spread.

    Example:
        >>> m, v = moments(np.array([[1.0, 2.0, 3.0, 6.0]]), (1,))
        >>> m.tolist(), v.tolist()
        ([[3.0]], [[3.5]])
    """
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    variance = np.mean(centered * centered, axis=axes, keepdims=True)
    return mean, variance
