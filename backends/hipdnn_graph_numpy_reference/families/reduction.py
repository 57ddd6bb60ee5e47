"""The reduction reference: Y reduces X over every axis where Y's dim is 1, in the compute type.

| mode | Y |
|---|---|
| ADD | the sum |
| MUL | the product |
| MIN, MAX | the least, the greatest element |
| AMAX | the greatest absolute value |
| AVG | the mean |
| NORM1 | the sum of absolute values |
| NORM2 | the square root of the sum of squares |
| MUL_NO_ZEROS | the product of the non-zero elements (1 when all are zero) |

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> g = hg.Graph(io_data_type=hg.DataType.FLOAT, compute_data_type=hg.DataType.FLOAT,
    ...              intermediate_data_type=hg.DataType.FLOAT)
    >>> y = g.reduction(g.tensor(name="x", dim=[2, 3]), mode=hg.ReductionMode.NORM2, name="n")
    >>> _ = y.set_dim([2, 1]).set_stride([1, 1])
    >>> g.validate()
    >>> x = np.array([[3.0, 4.0, 0.0], [1.0, 0.0, 0.0]])
    >>> run_reduction(g.nodes[0], {"X": x})["Y"].tolist()
    [[5.0], [1.0]]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import ReferenceFamily, as_compute, compute_dtype, raise_refusal

__all__ = ["FAMILIES", "reduction_refusal", "run_reduction"]

Array = np.ndarray[Any, Any]
_R = hg.ReductionMode
#: a mode's math: (X in the compute type, reduced axes) -> Y with the reduced axes kept
Reduce = Callable[[Array, tuple[int, ...]], Array]

_RULES: dict[hg.ReductionMode, Reduce] = {
    _R.ADD: lambda x, ax: np.sum(x, axis=ax, keepdims=True),
    _R.MUL: lambda x, ax: np.prod(x, axis=ax, keepdims=True),
    _R.MIN: lambda x, ax: np.min(x, axis=ax, keepdims=True),
    _R.MAX: lambda x, ax: np.max(x, axis=ax, keepdims=True),
    _R.AMAX: lambda x, ax: np.max(np.abs(x), axis=ax, keepdims=True),
    _R.AVG: lambda x, ax: np.mean(x, axis=ax, keepdims=True),
    _R.NORM1: lambda x, ax: np.sum(np.abs(x), axis=ax, keepdims=True),
    _R.NORM2: lambda x, ax: np.sqrt(np.sum(x * x, axis=ax, keepdims=True)),
    _R.MUL_NO_ZEROS: lambda x, ax: np.prod(np.where(x == 0, 1, x), axis=ax, keepdims=True),
}

#: the modes the reference defines (every ReductionMode member but NOT_SET)
MODES = frozenset(_RULES)


def reduction_refusal(node: hg.ReductionNode) -> str | None:
    """Why the reference cannot run this reduction node, or ``None``."""
    a = node.attributes
    x, y = a.get_x(), a.get_y()
    where = f"node '{node.name}'"
    if a.mode not in MODES:
        return f"{where}: reduction mode {hg.ReductionMode(a.mode).name} has no reference"
    if x is None or y is None or len(x.dim) != len(y.dim):
        return f"{where}: X and Y must be set and have one rank"
    if any(yd not in (xd, 1) for xd, yd in zip(x.dim, y.dim, strict=True)):
        return f"{where}: Y's dims {y.dim} are not X's {x.dim} with reduced axes of 1"
    return None


def run_reduction(node: hg.ReductionNode, inputs: Mapping[str, Any]) -> dict[str, Array]:
    """Y from X, reducing every axis where Y's dim is 1 (see the module docstring's table).

    Args:
        node: a validated reduction node.
        inputs: ``X`` as an array of its dims.

    Returns:
        ``{"Y": array of Y's dims}``.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for what :func:`reduction_refusal` names or a
            compute type the reference does not compute in.
    """
    raise_refusal(reduction_refusal(node))
    ct = compute_dtype(node)
    y = node.attributes.get_y()
    assert y is not None
    x = as_compute(inputs["X"], ct)
    axes = tuple(i for i, d in enumerate(y.dim) if d == 1)
    with np.errstate(all="ignore"):  # overflow to inf is the math's answer in the compute type
        result = _RULES[hg.ReductionMode(node.attributes.mode)](x, axes)
    return {"Y": result.astype(ct, copy=False)}


#: the node types this module runs, as the package collects them
FAMILIES = (ReferenceFamily(hg.NodeType.REDUCTION, run_reduction, reduction_refusal),)
