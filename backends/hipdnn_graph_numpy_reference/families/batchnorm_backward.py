"""The batch-norm backward reference (spatial mode), in the node's compute type, as hipDNN's CPU
reference defines it. Per channel ``c``, over the ``n`` values of N and the spatial dims, with
``x̂ = (X − mean_c) · inv_variance_c``::

    DBIAS_c  = Σ DY
    DSCALE_c = Σ x̂ · DY
    DX       = SCALE_c · inv_variance_c · (DY − DBIAS_c / n − x̂ · DSCALE_c / n)

``mean`` and ``inv_variance`` are the saved MEAN and INV_VARIANCE when the node has them (used
as given), otherwise the batch's own (biased variance) with hipDNN's reference epsilon
:data:`DEFAULT_EPSILON`: the node carries no epsilon.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.DOUBLE)
    >>> dy, x = (g.tensor(name=n, dim=[4, 1], stride=[1, 1]) for n in ("dy", "x"))
    >>> outs = g.batchnorm_backward(dy, x, g.tensor(name="s", dim=[1, 1], stride=[1, 1]))
    >>> for t in outs:
    ...     _ = t.set_output(True)
    >>> g.validate()
    >>> arrays = {"DY": np.ones((4, 1)), "X": np.arange(4.0).reshape(4, 1),
    ...           "SCALE": np.ones((1, 1))}
    >>> out = run_batchnorm_backward(g.nodes[0], arrays)
    >>> out["DBIAS"].tolist(), bool(np.abs(out["DX"]).max() < 1e-12)
    ([[4.0]], True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import ReferenceFamily, as_compute, compute_dtype
from ._statistics import moments, output_like, per_channel
from .batchnorm import spatial_axes

__all__ = ["DEFAULT_EPSILON", "FAMILIES", "run_batchnorm_backward"]

Array = np.ndarray[Any, Any]

#: the epsilon hipDNN's CPU reference uses when the backward computes the batch statistics
DEFAULT_EPSILON = 1e-5


def run_batchnorm_backward(
    node: hg.BatchnormBackwardNode, inputs: Mapping[str, Any]
) -> dict[str, Array]:
    """DX, DSCALE and DBIAS from DY, X, SCALE and (when set) the saved MEAN and INV_VARIANCE.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE.
    """
    dtype = compute_dtype(node)
    x, dy = as_compute(inputs["X"], dtype), as_compute(inputs["DY"], dtype)
    axes = spatial_axes(x.ndim)
    a = node.attributes
    if a.get_mean() is not None and a.get_inv_variance() is not None:
        mean = per_channel(inputs["MEAN"], x.ndim, dtype)
        inv_variance = per_channel(inputs["INV_VARIANCE"], x.ndim, dtype)
    else:
        mean, variance = moments(x, axes)
        inv_variance = 1 / np.sqrt(variance + dtype.type(DEFAULT_EPSILON))
    scale = per_channel(inputs["SCALE"], x.ndim, dtype)
    count = dtype.type(x.size // x.shape[1])
    x_hat = (x - mean) * inv_variance
    dbias = np.sum(dy, axis=axes, keepdims=True)
    dscale = np.sum(x_hat * dy, axis=axes, keepdims=True)
    dx = (dy - dbias / count - x_hat * (dscale / count)) * (scale * inv_variance)
    return {
        "DX": dx,
        "DSCALE": output_like(node, "DSCALE", dscale),
        "DBIAS": output_like(node, "DBIAS", dbias),
    }


#: the node types this module runs, as the package collects them
FAMILIES = (ReferenceFamily(hg.NodeType.BATCHNORM_BACKWARD, run_batchnorm_backward),)
