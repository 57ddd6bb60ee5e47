"""What the layer-norm and RMSNorm backward references share: the node's compute dtype,
operands in it, the refusal of what hipDNN does not define, and results in their tensors' dims.

Example:
    >>> import numpy as np
    >>> as_compute(np.array([1, 2], np.float16), np.dtype(np.float64)).dtype.name
    'float64'
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hipdnn_graph as hg

__all__ = ["Array", "as_compute", "compute_dtype", "in_dims_of", "refuse"]

Array = np.ndarray[Any, Any]

#: the compute data types the references compute in, and their NumPy dtypes
_COMPUTE_DTYPES: dict[hg.DataType, np.dtype[Any]] = {
    hg.DataType.FLOAT: np.dtype(np.float32),
    hg.DataType.DOUBLE: np.dtype(np.float64),
}


def refuse(node: Any, why: str) -> hg.HipdnnError:
    """The error for what a reference does not define: ``GRAPH_NOT_SUPPORTED`` naming the node
    (a node, or its name) and why."""
    name = node if isinstance(node, str) else node.name
    return hg.HipdnnError(hg.ErrorCode.GRAPH_NOT_SUPPORTED, f"node '{name}': {why}")


def compute_dtype(node: Any) -> np.dtype[Any]:
    """The NumPy dtype of the node's compute data type.

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` for a compute type other than FLOAT or DOUBLE.
    """
    data_type = hg.DataType(node.attributes.compute_data_type)
    if data_type not in _COMPUTE_DTYPES:
        raise refuse(node, f"compute type {data_type.name} (FLOAT or DOUBLE only)")
    return _COMPUTE_DTYPES[data_type]


def as_compute(value: Any, dtype: np.dtype[Any]) -> Array:
    """``value`` (an array of any storage type, or a number) in the compute dtype; never a view
    the caller could see written (the references only build new arrays from it)."""
    return np.asarray(value, dtype=dtype)


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
