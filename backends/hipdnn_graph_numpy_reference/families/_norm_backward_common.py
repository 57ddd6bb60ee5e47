"""What the layer-norm and RMSNorm backward references share beyond :mod:`._common`: the refusal
of what hipDNN does not define, and results in their tensors' dims.

Example:
    >>> import numpy as np
    >>> as_compute(np.array([1, 2], np.float16), np.dtype(np.float64)).dtype.name
    'float64'
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hipdnn_graph as hg

from ._common import as_compute, compute_dtype, not_supported

__all__ = ["Array", "as_compute", "compute_dtype", "in_dims_of", "refuse"]

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
