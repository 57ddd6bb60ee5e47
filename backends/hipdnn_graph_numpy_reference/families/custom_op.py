"""NumPy reference of the custom op: there is none, by definition.

A custom op is a plugin-defined operation: hipDNN carries its tensors and an opaque byte payload
to the plugin its ``custom_op_id`` names and knows nothing of what it computes. The reference
therefore refuses every custom op node, naming the node and the plugin operation
(``GRAPH_NOT_SUPPORTED``, the reason :func:`hipdnn_graph.nodes.custom_op.custom_op_refusal`
gives); running one takes an engine from the plugin that defines it.

Example:
    >>> import hipdnn_graph as hg
    >>> node = hg.CustomOpNode(hg.CustomOpAttributes().set_name("op")
    ...                        .set_custom_op_id("example.rope"))
    >>> custom_op_refusal(node)
    "custom op 'example.rope' is plugin-defined: hipDNN defines no math for it"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import hipdnn_graph as hg
from hipdnn_graph.nodes.custom_op import custom_op_refusal

from ._common import ReferenceFamily

# custom_op_refusal is the core's (hipdnn_graph.nodes.custom_op), re-exported here where it was
# first defined
__all__ = ["FAMILIES", "custom_op_refusal", "run_custom_op"]


def run_custom_op(
    node: hg.CustomOpNode, inputs: Mapping[str, Any]
) -> dict[str, np.ndarray[Any, Any]]:
    """Refuse to compute a custom op (see the module doc).

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED`` naming the node and its plugin operation.
    """
    raise hg.HipdnnError(
        hg.ErrorCode.GRAPH_NOT_SUPPORTED, f"node '{node.name}': {custom_op_refusal(node)}"
    )


#: the node types this module runs, as the package collects them
FAMILIES = (ReferenceFamily(hg.NodeType.CUSTOM_OP, run_custom_op, custom_op_refusal),)
