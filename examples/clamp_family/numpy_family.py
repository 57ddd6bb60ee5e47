"""The NumPy reference of the example family ``clamp`` (docs/adding-a-family.md, third file):
the living definition of its math, in the node's compute type.

``Y = min(max(X, lower), upper)`` element by element; a bound left ``None`` is no bound; a NaN
in X stays NaN (as ``torch.clamp`` keeps it).

Example:
    >>> import numpy as np, hipdnn_graph as hg
    >>> from clamp_family.node import clamp
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> _ = clamp(g, g.tensor(name="x", dim=[4]), lower=-1.0)
    >>> g.validate()
    >>> run_clamp(g.nodes[0], {"X": np.array([-3.0, 0.5, 9.0, np.nan])})["Y"].tolist()
    [-1.0, 0.5, 9.0, nan]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from clamp_family.node import ClampNode

import hipdnn_graph as hg
from hipdnn_graph_numpy_reference.families import (
    ReferenceFamily,
    as_compute,
    compute_dtype,
    register_family,
)

__all__ = ["FAMILIES", "run_clamp"]


def run_clamp(node: ClampNode, inputs: Mapping[str, Any]) -> dict[str, np.ndarray[Any, Any]]:
    """Y from X (see the module doc).

    Args:
        node: a validated clamp node.
        inputs: ``X`` as an array of its dims.

    Returns:
        ``{"Y": array of Y's dims}`` in the compute type (the engine casts it to Y's type).
    """
    ct = compute_dtype(node)
    a = node.attributes
    x = as_compute(inputs["X"], ct)
    lower = -np.inf if a.lower is None else a.lower
    upper = np.inf if a.upper is None else a.upper
    return {"Y": np.clip(x, lower, upper).astype(ct, copy=False)}


#: the family's record, registered with the reference on import (by the node's family id)
FAMILIES = register_family(
    ReferenceFamily(hg.NodeType.CUSTOM_OP, run_clamp, family_id=ClampNode.family_id)
)
