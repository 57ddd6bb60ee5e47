"""The torch lowering of the example family ``clamp`` (docs/adding-a-family.md, fourth file):
what the eager and the fusion torch engines run, tested against the NumPy reference.

``prepare_clamp(node)`` reads the node once and returns a closure of tensors only, so that
``torch.compile`` traces it without guards on the attributes; torch is imported lazily, so
importing this module does not import torch.

Example:
    >>> import torch, hipdnn_graph as hg
    >>> from clamp_family.node import clamp
    >>> f = hg.DataType.FLOAT
    >>> g = hg.Graph(io_data_type=f, intermediate_data_type=f, compute_data_type=f)
    >>> _ = clamp(g, g.tensor(name="x", dim=[3]), lower=0.0, upper=1.0)
    >>> g.validate()
    >>> prepare_clamp(g.nodes[0])({"X": torch.tensor([-2.0, 0.25, 3.0])})["Y"].tolist()
    [0.0, 0.25, 1.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clamp_family.node import ClampNode

import hipdnn_graph as hg
from hipdnn_graph_torch_rocm.families import (
    FLOATING,
    Prepared,
    TorchFamily,
    compute_dtype,
    dtype_refusal,
    register_family,
)

__all__ = ["FAMILIES", "clamp_refusal", "prepare_clamp"]


def clamp_refusal(node: ClampNode) -> str | None:
    """Why the torch engines do not run ``node`` (a compute or storage type that is not a
    floating type torch computes in), or ``None``."""
    return dtype_refusal(node, FLOATING)


def prepare_clamp(node: ClampNode) -> Prepared:
    """The closure the engines run: ``{"X": tensor}`` -> ``{"Y": tensor}`` in the compute
    type."""
    import torch

    ct = compute_dtype(node)
    lower, upper = node.attributes.lower, node.attributes.upper

    def run(inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {"Y": torch.clamp(inputs["X"].to(ct), min=lower, max=upper)}

    return run


#: the family's record, registered with the torch engines on import (by the node's family id)
FAMILIES = register_family(
    TorchFamily(hg.NodeType.CUSTOM_OP, prepare_clamp, clamp_refusal, family_id=ClampNode.family_id)
)
