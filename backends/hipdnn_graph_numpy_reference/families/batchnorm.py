"""The batch-norm forward references (spatial mode: per channel ``c`` on axis 1, the statistics
taken over N and every spatial dim), in the node's compute type, as hipDNN's CPU reference
defines them:

* training (``run_batchnorm``): ``mean_c`` and the biased ``var_c`` of the batch;
  ``INV_VARIANCE = 1 / sqrt(var_c + EPSILON)``;
  ``Y = SCALE_c · (X − mean_c) · INV_VARIANCE_c + BIAS_c``; MEAN and INV_VARIANCE are written
  when set. With the running statistics (``m`` = MOMENTUM, ``n`` = values per channel):
  ``NEXT_RUNNING_MEAN = (1 − m) · PREV_RUNNING_MEAN + m · mean_c`` and
  ``NEXT_RUNNING_VARIANCE = (1 − m) · PREV_RUNNING_VARIANCE + m · var_c · n / (n − 1)`` (the
  unbiased variance; hipDNN's rules require ``n > 1``);
* inference from saved statistics (``run_batchnorm_inference``):
  ``Y = SCALE_c · (X − MEAN_c) · INV_VARIANCE_c + BIAS_c``;
* inference from the variance (``run_batchnorm_inference_variance_ext``): the same with
  ``INV_VARIANCE = 1 / sqrt(VARIANCE_c + EPSILON)``.

The variance is the mean of squared deviations (hipDNN's reference sums ``x²`` and subtracts
``mean²``: the same value, with less rounding here).

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT)
    >>> x = g.tensor(name="x", dim=[2, 1, 2], stride=[2, 2, 1])
    >>> s, b = (g.tensor(name=n, dim=[1, 1, 1], stride=[1, 1, 1]) for n in "sb")
    >>> eps = g.tensor(name="eps", dim=[1], stride=[1]).set_value(0.0)
    >>> y, mean, inv_var, _, _ = g.batchnorm(x, s, b, epsilon=eps)
    >>> for t in (y, mean, inv_var):
    ...     _ = t.set_output(True)
    >>> g.validate()
    >>> arrays = {"X": np.array([[[1.0, 3.0]], [[5.0, 7.0]]]), "SCALE": np.ones((1, 1, 1)),
    ...           "BIAS": np.zeros((1, 1, 1)), "EPSILON": 0.0}
    >>> out = run_batchnorm(g.nodes[0], arrays)
    >>> out["MEAN"].tolist(), out["INV_VARIANCE"].tolist(), out["Y"][0].tolist()
    ([[[4.0]]], [[[0.4472135901451111]]], [[-1.3416407108306885, -0.4472135901451111]])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import ReferenceFamily, as_compute, compute_dtype
from ._statistics import moments, output_like, per_channel, scalar_input

__all__ = [
    "FAMILIES",
    "run_batchnorm",
    "run_batchnorm_inference",
    "run_batchnorm_inference_variance_ext",
    "spatial_axes",
]

Array = np.ndarray[Any, Any]


def spatial_axes(ndim: int) -> tuple[int, ...]:
    """The axes a spatial batch norm reduces: N and every dim after the channels."""
    return (0, *range(2, ndim))


def _normalize(x: Array, mean: Array, inv_variance: Array, scale: Array, bias: Array) -> Array:
    y: Array = scale * ((x - mean) * inv_variance) + bias
    return y


def run_batchnorm(node: hg.BatchnormNode, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """Batch-norm training forward: Y, and MEAN, INV_VARIANCE, NEXT_RUNNING_MEAN and
    NEXT_RUNNING_VARIANCE where the node sets them.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE;
            ``INVALID_VALUE`` for an EPSILON or MOMENTUM of more than one element.
    """
    a = node.attributes
    dtype = compute_dtype(node)
    x = as_compute(inputs["X"], dtype)
    axes = spatial_axes(x.ndim)
    mean, variance = moments(x, axes)
    inv_variance = 1 / np.sqrt(variance + scalar_input(inputs, "EPSILON", dtype))
    scale, bias = (per_channel(inputs[s], x.ndim, dtype) for s in ("SCALE", "BIAS"))
    out = {"Y": _normalize(x, mean, inv_variance, scale, bias)}
    if a.get_mean() is not None:
        out["MEAN"] = output_like(node, "MEAN", mean)
    if a.get_inv_variance() is not None:
        out["INV_VARIANCE"] = output_like(node, "INV_VARIANCE", inv_variance)
    if a.get_next_running_mean() is None and a.get_next_running_variance() is None:
        return out
    momentum = scalar_input(inputs, "MOMENTUM", dtype)
    count = x.size // x.shape[1]
    unbiased = variance * (count / max(count - 1, 1))  # validation requires count > 1
    running = (("MEAN", mean), ("VARIANCE", unbiased))
    for name, batch in running:
        previous = per_channel(inputs[f"PREV_RUNNING_{name}"], x.ndim, dtype)
        slot = f"NEXT_RUNNING_{name}"
        if slot in a.tensors_by_slot():
            out[slot] = output_like(node, slot, (1 - momentum) * previous + momentum * batch)
    return out


def run_batchnorm_inference(
    node: hg.BatchnormInferenceNode, inputs: Mapping[str, Any]
) -> dict[str, Array]:
    """Batch-norm inference from the saved MEAN and INV_VARIANCE: Y.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE.
    """
    dtype = compute_dtype(node)
    x = as_compute(inputs["X"], dtype)
    mean, inv_variance, scale, bias = (
        per_channel(inputs[s], x.ndim, dtype) for s in ("MEAN", "INV_VARIANCE", "SCALE", "BIAS")
    )
    return {"Y": _normalize(x, mean, inv_variance, scale, bias)}


def run_batchnorm_inference_variance_ext(
    node: hg.BatchnormInferenceVarianceNode, inputs: Mapping[str, Any]
) -> dict[str, Array]:
    """Batch-norm inference from the saved MEAN and VARIANCE and an EPSILON: Y.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE;
            ``INVALID_VALUE`` for an EPSILON of more than one element.
    """
    dtype = compute_dtype(node)
    x = as_compute(inputs["X"], dtype)
    mean, variance, scale, bias = (
        per_channel(inputs[s], x.ndim, dtype) for s in ("MEAN", "VARIANCE", "SCALE", "BIAS")
    )
    inv_variance = 1 / np.sqrt(variance + scalar_input(inputs, "EPSILON", dtype))
    return {"Y": _normalize(x, mean, inv_variance, scale, bias)}


#: the node types this module runs, as the package collects them
FAMILIES = (
    ReferenceFamily(hg.NodeType.BATCHNORM, run_batchnorm),
    ReferenceFamily(hg.NodeType.BATCHNORM_INFERENCE, run_batchnorm_inference),
    ReferenceFamily(
        hg.NodeType.BATCHNORM_INFERENCE_VARIANCE_EXT, run_batchnorm_inference_variance_ext
    ),
)
