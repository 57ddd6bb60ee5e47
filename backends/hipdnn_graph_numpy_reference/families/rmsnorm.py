"""The RMSNorm forward reference, in the node's compute type, as hipDNN's CPU reference defines
it. X is normalized over its normalized shape: the longest run of trailing dims where SCALE
equals X (from dim 1 when they all do), per position of the dims before it::

    INV_RMS = 1 / sqrt(Σ X² / m + EPSILON)   (m values)
    Y = SCALE · X · INV_RMS (+ BIAS)

INV_RMS (written when set, whatever the phase) holds one value per leading position, in its
tensor's dims.

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.DOUBLE)
    >>> x = g.tensor(name="x", dim=[2, 2], stride=[2, 1])
    >>> y, inv_rms = g.rmsnorm(x, g.tensor(name="s", dim=[1, 2], stride=[2, 1]),
    ...                        epsilon=hg.TensorAttributes().set_value(0.0),
    ...                        forward_phase=hg.NormFwdPhase.TRAINING)
    >>> for t in (y, inv_rms):
    ...     _ = t.set_output(True)
    >>> g.validate()
    >>> arrays = {"X": np.array([[3.0, 4.0], [1.0, 1.0]]), "SCALE": np.ones((1, 2)), "EPSILON": 0.0}
    >>> out = run_rmsnorm(g.nodes[0], arrays)
    >>> out["Y"][0].tolist(), out["INV_RMS"].shape
    ([0.848528137423857, 1.131370849898476], (2, 1))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import ReferenceFamily, as_compute, compute_dtype
from ._statistics import output_like, scalar_input

__all__ = ["FAMILIES", "normalized_start", "run_rmsnorm"]

Array = np.ndarray[Any, Any]


def normalized_start(x: Sequence[int], scale: Sequence[int]) -> int:
    """The first normalized dim: where the trailing run of dims on which SCALE equals X
    begins, and 1 when SCALE equals X everywhere (dim 0 is always a leading dim).

    Example:
        >>> normalized_start([2, 64, 8, 8], [1, 64, 8, 8]), normalized_start([2, 3], [1, 3])
        (1, 1)
        >>> normalized_start([2, 5, 32], [1, 1, 32])
        2
    """
    matching = 0
    for s, d in zip(reversed(scale), reversed(x), strict=False):
        if s != d:
            break
        matching += 1
    return 1 if matching >= len(x) else len(x) - matching


def run_rmsnorm(node: hg.RMSNormNode, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """Y, and INV_RMS where the node sets it.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE;
            ``INVALID_VALUE`` for an EPSILON of more than one element.
    """
    a = node.attributes
    dtype = compute_dtype(node)
    x = as_compute(inputs["X"], dtype)
    scale = as_compute(inputs["SCALE"], dtype)
    x_tensor, scale_tensor = a.get_x(), a.get_scale()
    assert x_tensor is not None and scale_tensor is not None  # a validated node has them
    axes = tuple(range(normalized_start(x_tensor.dim, scale_tensor.dim), x.ndim))
    mean_square = np.mean(x * x, axis=axes, keepdims=True)
    inv_rms = 1 / np.sqrt(mean_square + scalar_input(inputs, "EPSILON", dtype))
    y = scale * x * inv_rms
    if a.get_bias() is not None:
        y = y + as_compute(inputs["BIAS"], dtype)
    out = {"Y": y}
    if a.get_inv_rms() is not None:
        out["INV_RMS"] = output_like(node, "INV_RMS", inv_rms)
    return out


#: the node types this module runs, as the package collects them
FAMILIES = (ReferenceFamily(hg.NodeType.RMS_NORM, run_rmsnorm),)
