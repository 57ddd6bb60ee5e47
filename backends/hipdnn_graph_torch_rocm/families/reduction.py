"""The reduction lowering: Y = mode-reduce(X) over the axes where Y is 1 and X is not.

Every :class:`~hipdnn_graph.ReductionMode`: ``ADD`` (sum), ``MUL`` (product), ``MIN``, ``MAX``,
``AMAX`` (max of ``|x|``), ``AVG`` (mean), ``NORM1`` (sum of ``|x|``), ``NORM2``
(``sqrt(sum x²)``) and ``MUL_NO_ZEROS`` (product of the non-zero elements; 1 when all are zero),
computed in the node's compute type.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> x = g.tensor(name="x", dim=[2, 3])
    >>> y = g.tensor(name="y", dim=[2, 1])
    >>> _ = g.reduction(x, y, mode=hg.ReductionMode.ADD, name="sum")
    >>> g.validate()
    >>> prepare_reduction(g.nodes[0])({"X": torch.ones(2, 3)})["Y"].tolist()
    [[3.0], [3.0]]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import hipdnn_graph as hg

from ._common import Prepared, TorchFamily, compute_dtype, dtype_refusal
from .pointwise import STORAGE

__all__ = ["FAMILIES", "prepare_reduction", "reduced_axes", "reduction_refusal"]

R = hg.ReductionMode


def reduced_axes(x_dims: list[int], y_dims: list[int]) -> tuple[int, ...]:
    """The axes a reduction reduces: where Y is 1 and X is not.

    Example:
        >>> reduced_axes([2, 3, 4], [2, 1, 1])
        (1, 2)
    """
    return tuple(i for i, (x, y) in enumerate(zip(x_dims, y_dims, strict=True)) if y == 1 != x)


def _combine(torch: Any) -> dict[R, Callable[[Any], Any]]:
    """Each mode as a function of a tensor whose last axis holds the reduced elements."""
    return {
        R.ADD: lambda v: v.sum(-1),
        R.MUL: lambda v: v.prod(-1),
        R.MIN: lambda v: v.amin(-1),
        R.MAX: lambda v: v.amax(-1),
        R.AMAX: lambda v: v.abs().amax(-1),
        R.AVG: lambda v: v.mean(-1),
        R.NORM1: lambda v: v.abs().sum(-1),
        R.NORM2: lambda v: torch.sqrt((v * v).sum(-1)),
        R.MUL_NO_ZEROS: lambda v: torch.where(v == 0, torch.ones_like(v), v).prod(-1),
    }


def reduction_refusal(node: hg.ReductionNode) -> str | None:
    """Why the lowering cannot run this node, or None."""
    a = node.attributes
    x, y = a.get_x(), a.get_y()
    if x is not None and y is not None and len(x.dim) != len(y.dim):
        return f"node '{node.name}': Y must have X's rank ({len(x.dim)}), got {len(y.dim)}"
    return dtype_refusal(node, STORAGE)


def prepare_reduction(node: hg.ReductionNode) -> Prepared:
    """The node's lowering with its axes and mode read now."""
    import torch

    a = node.attributes
    x, y = a.get_x(), a.get_y()
    assert x is not None and y is not None
    axes = reduced_axes(list(x.dim), list(y.dim))
    kept = tuple(i for i in range(len(x.dim)) if i not in axes)
    order = (*kept, *axes)
    y_dims = list(y.dim)
    kept_dims = [x.dim[i] for i in kept]
    combine = _combine(torch)[a.mode]
    compute = compute_dtype(node)

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        v = inputs["X"].to(compute).permute(order).reshape(*kept_dims, -1)
        return {"Y": combine(v).reshape(y_dims)}

    return run


#: the node types this module lowers, as the package collects them
FAMILIES = (TorchFamily(hg.NodeType.REDUCTION, prepare_reduction, reduction_refusal),)
