"""NumPy reference of the custom op: there is none, by definition.

A custom op is a plugin-defined operation: hipDNN carries its tensors and an opaque byte payload
to the plugin its ``custom_op_id`` names and knows nothing of what it computes. The reference
therefore refuses every custom op node, naming the node and the plugin operation
(``GRAPH_NOT_SUPPORTED``); running one takes an engine from the plugin that defines it.

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

__all__ = ["custom_op_refusal", "run_custom_op"]


def custom_op_refusal(node: hg.CustomOpNode) -> str:
    """Why the reference does not run ``node``: always, its math is the plugin's."""
    op = node.attributes.get_custom_op_id() or "(no custom_op_id)"
    return f"custom op {op!r} is plugin-defined: hipDNN defines no math for it"


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
