"""What the layer-norm and RMSNorm backward references share beyond :mod:`._common`: the refusal
of what hipDNN does not define, the inputs both start from, and results in their tensors' dims.

Example:
    >>> import numpy as np
    >>> refuse("n", "EPSILON holds 2 values, not one").message
    "node 'n': EPSILON holds 2 values, not one"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

import hipdnn_graph as hg

from ._common import as_compute, compute_dtype, not_supported

__all__ = ["Array", "GradientInputs", "gradient_inputs", "in_dims_of", "refuse"]

Array = np.ndarray[Any, Any]


def refuse(node: Any, why: str) -> hg.HipdnnError:
    """:func:`._common.not_supported`, also for a node given by its name."""
    if isinstance(node, str):
        return hg.HipdnnError(hg.ErrorCode.GRAPH_NOT_SUPPORTED, f"node '{node}': {why}")
    return not_supported(node, why)


def in_dims_of(node: Any, slot: str, value: Array, dims: list[int] | None = None) -> Array:
    """``value`` reshaped to the dims of the node's tensor ``slot`` (or to ``dims``): the same
    elements in the same order.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` when the element counts differ.
    """
    target = list(node.attributes.tensors_by_slot()[slot].dim) if dims is None else dims
    if int(np.prod(target)) != value.size:
        raise refuse(
            node,
            f"{slot} holds {value.size} values where dims {target} need {int(np.prod(target))}",
        )
    return value.reshape(target)


class GradientInputs(NamedTuple):
    """What a norm backward reference starts from (:func:`gradient_inputs`)."""

    #: the node's compute dtype
    dtype: np.dtype[Any]
    #: X in the compute dtype, in its tensor's dims
    x: Array
    #: DY in the compute dtype, in X's dims
    dy: Array
    #: the dims of the node's X and SCALE tensors (which locate the normalized dims)
    x_dims: list[int]
    scale_dims: list[int]


def gradient_inputs(node: Any, inputs: Mapping[str, Any]) -> GradientInputs:
    """The compute dtype of a validated layer-norm or RMSNorm backward node, its X and DY in it
    and the dims of its X and SCALE tensors.

    Example:
        >>> import hipdnn_graph as hg
        >>> f32 = hg.DataType.FLOAT
        >>> g = hg.Graph(io_data_type=f32, intermediate_data_type=f32, compute_data_type=f32)
        >>> x = g.tensor(name="x", dim=[2, 3])
        >>> _ = g.rmsnorm_backward(g.tensor(name="dy", dim=[2, 3]), x,
        ...                        g.tensor(name="s", dim=[1, 3]), g.tensor(name="r", dim=[2, 1]))
        >>> g.validate()
        >>> start = gradient_inputs(g.nodes[0], {"X": np.ones(6), "DY": np.zeros((2, 3))})
        >>> start.dtype.name, start.x.shape, start.dy.shape, start.x_dims, start.scale_dims
        ('float32', (2, 3), (2, 3), [2, 3], [1, 3])

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE, or
            an X or DY holding another number of values than X's dims need.
    """
    a = node.attributes
    dtype = compute_dtype(node)
    x_tensor, scale_tensor = a.get_x(), a.get_scale()
    assert x_tensor is not None and scale_tensor is not None  # a validated node has them
    x = in_dims_of(node, "X", as_compute(inputs["X"], dtype))
    dy = in_dims_of(node, "DY", as_compute(inputs["DY"], dtype), list(x.shape))
    return GradientInputs(dtype, x, dy, list(x_tensor.dim), list(scale_tensor.dim))
