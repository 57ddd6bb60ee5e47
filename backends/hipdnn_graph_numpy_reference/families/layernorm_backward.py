"""The layer-norm backward reference, in the node's compute type, as hipDNN's CPU reference
(``CpuFpReferenceLayernorm::bprop``) defines it.

The normalized axes: where SCALE has X's rank, the axes on which SCALE equals X (SCALE is 1 on
the others, the batch axes); where SCALE has a lower rank, the last ``normalized_dim_count`` axes
of X, whose dims SCALE holds. With ``m`` values per batch position, the forward pass's statistics
MEAN and INV_VARIANCE (or, without them, the mean and ``1 / sqrt(var + EPSILON)`` of X, EPSILON
1e-5 when the node has none, as hipDNN's plan) and sums over the normalized axes::

    X̂ = (X - MEAN) · INV_VARIANCE,  G = DY · SCALE
    DX = INV_VARIANCE · (G - Σ G / m - X̂ · Σ G · X̂ / m)
    DSCALE = Σ_batch DY · X̂,  DBIAS = Σ_batch DY       (SCALE's dims)

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.DOUBLE)
    >>> dy, x = g.tensor(name="dy", dim=[2, 2]), g.tensor(name="x", dim=[2, 2])
    >>> for t in g.layernorm_backward(dy, x, g.tensor(name="s", dim=[1, 2])):
    ...     _ = t.set_output(True)
    >>> g.validate()
    >>> arrays = {"DY": np.array([[1.0, 0.0], [0.0, 1.0]]), "X": np.array([[1.0, 3.0], [2.0, 4.0]]),
    ...           "SCALE": np.ones((1, 2)), "EPSILON": 0.0}
    >>> out = run_layernorm_backward(g.nodes[0], arrays)
    >>> [(np.round(out[s], 4) + 0.0).tolist() for s in ("DX", "DSCALE", "DBIAS")]
    [[[0.0, 0.0], [0.0, 0.0]], [[-1.0, 1.0]], [[1.0, 1.0]]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import ReferenceFamily, as_compute
from ._norm_backward_common import Array, gradient_inputs, in_dims_of, refuse

__all__ = ["DEFAULT_EPSILON", "FAMILIES", "normalized_axes", "run_layernorm_backward"]

#: the epsilon hipDNN's CPU plan uses when the node has no EPSILON
DEFAULT_EPSILON = 1e-5


def normalized_axes(
    node: Any, x: Sequence[int], scale: Sequence[int], count: int
) -> tuple[int, ...]:
    """The axes of X the node (a node or its name) normalizes over (see the module doc).

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a normalized dim count outside ``[1, rank]``,
            a full-rank SCALE with a dim that is neither 1 nor X's, or a lower-rank SCALE that
            is not X's last ``normalized_dim_count`` dims.

    Example:
        >>> normalized_axes("ln", [4, 8, 16], [1, 8, 16], 2), normalized_axes("ln", [4, 8], [8], 1)
        ((1, 2), (1,))
    """
    if not 1 <= count <= len(x):
        raise refuse(node, f"normalized_dim_count {count} is not between 1 and X's rank {len(x)}")
    if len(scale) == len(x):
        for i, (d, s) in enumerate(zip(x, scale, strict=True)):
            if s not in (1, d):
                raise refuse(node, f"SCALE dim {i} is {s}, neither 1 nor X's {d}")
        return tuple(i for i, (d, s) in enumerate(zip(x, scale, strict=True)) if s == d)
    if list(scale) != list(x[len(x) - count :]):
        raise refuse(
            node,
            f"SCALE dims {list(scale)} are not X's last {count} (normalized_dim_count) dims "
            f"{list(x[len(x) - count :])}",
        )
    return tuple(range(len(x) - count, len(x)))


def _statistics(
    node: hg.LayernormBackwardNode,
    inputs: Mapping[str, Any],
    x: Array,
    axes: tuple[int, ...],
    dtype: np.dtype[Any],
) -> tuple[Array, Array]:
    """MEAN and INV_VARIANCE per batch position (kept as 1s on the normalized axes): the node's
    when it has both, else computed from X with the node's EPSILON (hipDNN's default without
    one)."""
    a = node.attributes
    kept = [1 if i in axes else d for i, d in enumerate(x.shape)]
    given = [t is not None for t in (a.get_mean(), a.get_inv_variance())]
    if all(given):
        mean = in_dims_of(node, "MEAN", as_compute(inputs["MEAN"], dtype), kept)
        inv_variance = as_compute(inputs["INV_VARIANCE"], dtype)
        return mean, in_dims_of(node, "INV_VARIANCE", inv_variance, kept)
    if any(given):
        raise refuse(node, "MEAN and INV_VARIANCE come together or not at all")
    has_epsilon = a.get_epsilon() is not None
    epsilon = as_compute(inputs["EPSILON"] if has_epsilon else DEFAULT_EPSILON, dtype)
    if epsilon.size != 1:
        raise refuse(node, f"EPSILON holds {epsilon.size} values, not one")
    mean = np.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    variance = np.mean(centered * centered, axis=axes, keepdims=True)
    return mean, 1 / np.sqrt(variance + epsilon.reshape(()))


def run_layernorm_backward(
    node: hg.LayernormBackwardNode, inputs: Mapping[str, Any]
) -> dict[str, Array]:
    """DX, DSCALE and DBIAS of a validated layer-norm backward node.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE,
            axes hipDNN's reference does not define (see :func:`normalized_axes`), only one of
            MEAN and INV_VARIANCE, an EPSILON of more than one value, or an input or output
            holding another number of values than its dims need.
    """
    dtype, x, dy, x_dims, scale_dims = gradient_inputs(node, inputs)
    axes = normalized_axes(node, x_dims, scale_dims, node.attributes.get_normalized_dim_count())
    broadcast = [d if i in axes else 1 for i, d in enumerate(x.shape)]
    scale = in_dims_of(node, "SCALE", as_compute(inputs["SCALE"], dtype), broadcast)
    batch = tuple(i for i in range(x.ndim) if i not in axes)

    mean, inv_variance = _statistics(node, inputs, x, axes, dtype)
    x_hat = (x - mean) * inv_variance
    g = dy * scale
    dx = inv_variance * (
        g
        - np.mean(g, axis=axes, keepdims=True)
        - x_hat * np.mean(g * x_hat, axis=axes, keepdims=True)
    )
    dscale = np.sum(dy * x_hat, axis=batch, keepdims=True)
    dbias = np.sum(dy, axis=batch, keepdims=True)
    return {
        "DX": in_dims_of(node, "DX", dx),
        "DSCALE": in_dims_of(node, "DSCALE", dscale),
        "DBIAS": in_dims_of(node, "DBIAS", dbias),
    }


#: the node types this module runs, as the package collects them
FAMILIES = (ReferenceFamily(hg.NodeType.LAYERNORM_BACKWARD, run_layernorm_backward),)
