"""The RMSNorm backward reference, in the node's compute type, as hipDNN's CPU reference
(``CpuFpReferenceRMSNorm::backward``) defines it.

The normalized axes are the forward node's: the longest run of trailing dims where SCALE equals
X (from dim 1 when they all do). With ``m`` values per leading position, INV_RMS (one value per
leading position, 1 on the normalized axes) and sums over the normalized axes::

    X̂ = X · INV_RMS,  G = DY · SCALE
    DX = INV_RMS · (G - X̂ · Σ G · X̂ / m)
    DSCALE = Σ_leading DY · X̂,  DBIAS = Σ_leading DY      (SCALE's dims; DBIAS when set)

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.DOUBLE)
    >>> t = lambda name, dims: g.tensor(name=name, dim=dims)
    >>> outs = g.rmsnorm_backward(t("dy", [1, 2]), t("x", [1, 2]), t("s", [1, 2]), t("r", [1, 1]))
    >>> for o in outs[:2]:
    ...     _ = o.set_output(True)
    >>> g.validate()
    >>> arrays = {"DY": np.array([[1.0, 0.0]]), "X": np.array([[3.0, 4.0]]),
    ...           "SCALE": np.ones((1, 2)), "INV_RMS": np.array([[0.2]])}
    >>> out = run_rmsnorm_backward(g.nodes[0], arrays)
    >>> np.round(out["DX"], 4).tolist(), np.round(out["DSCALE"], 4).tolist(), sorted(out)
    ([[0.164, -0.048]], [[0.6, 0.0]], ['DSCALE', 'DX'])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import ReferenceFamily, as_compute
from ._norm_backward_common import Array, gradient_inputs, in_dims_of
from .rmsnorm import normalized_start

__all__ = ["FAMILIES", "run_rmsnorm_backward"]


def run_rmsnorm_backward(
    node: hg.RMSNormBackwardNode, inputs: Mapping[str, Any]
) -> dict[str, Array]:
    """DX, DSCALE and, where the node sets it, DBIAS of a validated RMSNorm backward node.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE, or
            an input or output holding another number of values than its dims need (INV_RMS:
            one per leading position).
    """
    dtype, x, dy, x_dims, scale_dims = gradient_inputs(node, inputs)
    scale = in_dims_of(node, "SCALE", as_compute(inputs["SCALE"], dtype))
    start = normalized_start(x_dims, scale_dims)
    axes, leading = tuple(range(start, x.ndim)), tuple(range(start))
    kept = [*x.shape[:start], *(1 for _ in axes)]
    inv_rms = in_dims_of(node, "INV_RMS", as_compute(inputs["INV_RMS"], dtype), kept)

    x_hat = x * inv_rms
    g = dy * scale
    dx = inv_rms * (g - x_hat * np.mean(g * x_hat, axis=axes, keepdims=True))
    out = {
        "DX": in_dims_of(node, "DX", dx),
        "DSCALE": in_dims_of(node, "DSCALE", np.sum(dy * x_hat, axis=leading, keepdims=True)),
    }
    if node.attributes.get_dbias() is not None:
        out["DBIAS"] = in_dims_of(node, "DBIAS", np.sum(dy, axis=leading, keepdims=True))
    return out


#: the node types this module runs, as the package collects them
FAMILIES = (ReferenceFamily(hg.NodeType.RMS_NORM_BACKWARD, run_rmsnorm_backward),)
