"""The layer-norm forward reference, in the node's compute type, as hipDNN's CPU reference
defines it. X is normalized over its last ``k`` dims (the normalized dims), per position of the
dims before them (the batch dims)::

    mean = Σ X / m,   var = Σ (X − mean)² / m   (m values; the biased variance)
    INV_VARIANCE = 1 / sqrt(var + EPSILON)
    Y = SCALE · (X − mean) · INV_VARIANCE + BIAS

``k`` is the node's ``normalized_dim_count`` when positive; otherwise it is inferred as hipDNN's
frontend does: for a SCALE of X's rank, the run of trailing SCALE dims that are not 1 (at least
one dim); for a SCALE of lower rank, its rank. SCALE and BIAS broadcast (right-aligned) over the
normalized dims and must be 1 on every batch dim. MEAN and INV_VARIANCE (written when set,
whatever the phase) hold one value per batch position, in their tensors' dims (hipDNN's
frontend infers ``[N, 1, ...]`` for them beside a SCALE of lower rank: that only fits when
every dim after the first is normalized; set their dims otherwise).

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.DOUBLE)
    >>> x = g.tensor(name="x", dim=[2, 4], stride=[4, 1])
    >>> s, b = (g.tensor(name=n, dim=[1, 4], stride=[4, 1]) for n in "sb")
    >>> y, mean, inv_var = g.layernorm(x, s, b, epsilon=hg.TensorAttributes().set_value(0.0),
    ...                                forward_phase=hg.NormFwdPhase.TRAINING)
    >>> for t in (y, mean, inv_var):
    ...     _ = t.set_output(True)
    >>> g.validate()
    >>> arrays = {"X": np.array([[1.0, 2.0, 3.0, 6.0], [0.0, 0.0, 2.0, 2.0]]),
    ...           "SCALE": np.ones((1, 4)), "BIAS": np.zeros((1, 4)), "EPSILON": 0.0}
    >>> out = run_layernorm(g.nodes[0], arrays)
    >>> out["MEAN"].tolist(), out["Y"][1].tolist()
    ([[3.0], [1.0]], [-1.0, -1.0, 1.0, 1.0])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import ReferenceFamily, as_compute, compute_dtype, not_supported, raise_refusal
from ._statistics import moments, output_like, scalar_input

__all__ = ["FAMILIES", "layernorm_refusal", "normalized_dim_count", "run_layernorm"]

Array = np.ndarray[Any, Any]


def normalized_dim_count(node: hg.LayerNormNode) -> int:
    """How many trailing dims of X the node normalizes (its member, or hipDNN's inference from
    SCALE's dims when the member is not positive)."""
    a = node.attributes
    if a.normalized_dim_count > 0:
        return a.normalized_dim_count
    x, scale = a.get_x(), a.get_scale()
    assert x is not None and scale is not None  # a validated node has them
    if len(scale.dim) != len(x.dim):
        return len(scale.dim)
    count = 1
    for i in range(len(scale.dim) - 1, -1, -1):
        if scale.dim[i] == 1:
            break
        count = len(scale.dim) - i
    return count


def _affine_problem(x: Sequence[int], affine: Sequence[int], count: int) -> str | None:
    """Why an operand of dims ``affine`` does not broadcast over the last ``count`` dims of
    ``x`` alone, or ``None``."""
    if len(affine) > len(x):
        return f"rank {len(affine)} above X's {len(x)}"
    aligned = [1] * (len(x) - len(affine)) + list(affine)
    batch = len(x) - count
    for i, (d, n) in enumerate(zip(aligned, x, strict=True)):
        if d != 1 and (i < batch or d != n):
            return f"dims {list(affine)} do not broadcast over normalized dims {list(x[batch:])}"
    return None


def layernorm_refusal(node: hg.LayerNormNode) -> str | None:
    """Why the reference cannot run this layer-norm node (a SCALE or BIAS that does not
    broadcast over the normalized dims alone, statistics tensors that do not hold one value per
    batch position), or ``None``. (A count outside X's rank is refused by ``validate()``.)"""
    a = node.attributes
    x = a.get_x()
    assert x is not None  # a validated node has it
    count = normalized_dim_count(node)
    where = f"node '{node.name}'"
    slots = a.tensors_by_slot()
    for slot in ("SCALE", "BIAS"):
        tensor = slots.get(slot)
        problem = None if tensor is None else _affine_problem(x.dim, tensor.dim, count)
        if problem is not None:
            return f"{where}: {slot} {problem}"
    batch = x.dim[: len(x.dim) - count]
    for slot in ("MEAN", "INV_VARIANCE"):
        tensor = slots.get(slot)
        if tensor is not None and math.prod(tensor.dim) != math.prod(batch):
            return (
                f"{where}: {slot} has dims {tensor.dim}, not one value per batch position "
                f"{batch} ({count} normalized dims)"
            )
    return None


def run_layernorm(node: hg.LayerNormNode, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """Y, and MEAN and INV_VARIANCE where the node sets them.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for what :func:`layernorm_refusal` names or a
            compute type other than FLOAT or DOUBLE; ``INVALID_VALUE`` for an EPSILON of more
            than one element.
    """
    raise_refusal(layernorm_refusal(node))
    a = node.attributes
    dtype = compute_dtype(node)
    x = as_compute(inputs["X"], dtype)
    axes = tuple(range(x.ndim - normalized_dim_count(node), x.ndim))
    mean, variance = moments(x, axes)
    inv_variance = 1 / np.sqrt(variance + scalar_input(inputs, "EPSILON", dtype))
    scale, bias = as_compute(inputs["SCALE"], dtype), as_compute(inputs["BIAS"], dtype)
    y = scale * ((x - mean) * inv_variance) + bias
    if y.shape != x.shape:
        raise not_supported(node, f"SCALE and BIAS widen X's dims {list(x.shape)}")
    out = {"Y": y}
    if a.get_mean() is not None:
        out["MEAN"] = output_like(node, "MEAN", mean)
    if a.get_inv_variance() is not None:
        out["INV_VARIANCE"] = output_like(node, "INV_VARIANCE", inv_variance)
    return out


#: the node types this module runs, as the package collects them
FAMILIES = (ReferenceFamily(hg.NodeType.LAYER_NORM, run_layernorm, layernorm_refusal),)
