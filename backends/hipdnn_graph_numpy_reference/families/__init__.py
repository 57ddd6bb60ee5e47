"""The NumPy reference of each node family: one ``run_<family>(node, inputs)`` per family.

Every runner takes a validated node and ``inputs``, its set input slots by the names
``node.attributes.tensors_by_slot()`` gives (arrays of the tensors' dims, pass-by-value scalars
as Python numbers), and returns every set output slot as an array of that tensor's dims computed
in the node's compute type; the engine casts each to its tensor's data type. A runner raises
``HipdnnError`` (``GRAPH_NOT_SUPPORTED``) naming the node and the feature for what it does not
define. :data:`REFERENCE_RUNNERS` maps each :class:`~hipdnn_graph.NodeType` to its runner;
:data:`REFERENCE_CHECKS` maps a family to the function that says, when the plan is chosen, why
the reference refuses a node (``None`` when it runs it). SDPA forward and backward are not here:
their steps keep their own fast paths (:mod:`hipdnn_graph_numpy_reference.sdpa_step`).

Example:
    >>> import hipdnn_graph as hg
    >>> sorted(t.name for t in REFERENCE_RUNNERS)
    ['MATMUL', 'POINTWISE', 'REDUCTION']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg

from .matmul import matmul_refusal, run_matmul
from .pointwise import pointwise_refusal, run_pointwise
from .reduction import reduction_refusal, run_reduction

__all__ = ["REFERENCE_CHECKS", "REFERENCE_RUNNERS", "Runner"]

#: ``run_<family>(node, inputs) -> {output slot: array}``
Runner = Callable[[Any, Mapping[str, Any]], dict[str, np.ndarray[Any, Any]]]

#: node family → its NumPy reference
REFERENCE_RUNNERS: dict[hg.NodeType, Runner] = {
    hg.NodeType.POINTWISE: run_pointwise,
    hg.NodeType.MATMUL: run_matmul,
    hg.NodeType.REDUCTION: run_reduction,
}

#: node family → why the reference refuses a node of it (``None``: it runs it); families
#: without an entry are refused only for their data and compute types
REFERENCE_CHECKS: dict[hg.NodeType, Callable[[Any], str | None]] = {
    hg.NodeType.POINTWISE: pointwise_refusal,
    hg.NodeType.MATMUL: matmul_refusal,
    hg.NodeType.REDUCTION: reduction_refusal,
}
