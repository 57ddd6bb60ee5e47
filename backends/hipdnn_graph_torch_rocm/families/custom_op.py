"""The custom op: no lowering, by definition, and the reason every built-in engine gives.

A custom op is plugin-defined: hipDNN carries its tensors and an opaque payload to the plugin
its ``custom_op_id`` names and defines no math for it, so the torch engines refuse every custom
op node as the NumPy reference does, with the core's reason
(:func:`hipdnn_graph.nodes.custom_op.custom_op_refusal`, the one place that says why), naming
the node and the plugin operation.

Example:
    >>> import hipdnn_graph as hg
    >>> node = hg.CustomOpNode(hg.CustomOpAttributes().set_name("op")
    ...                        .set_custom_op_id("example.rope"))
    >>> custom_op_refusal(node)
    "node 'op': custom op 'example.rope' is plugin-defined: hipDNN defines no math for it"
"""

from __future__ import annotations

import hipdnn_graph as hg
from hipdnn_graph.nodes.custom_op import custom_op_refusal as _math_refusal

from ._common import Prepared, TorchFamily

__all__ = ["FAMILIES", "custom_op_refusal", "prepare_custom_op"]


def custom_op_refusal(node: hg.CustomOpNode) -> str:
    """Why the torch engines do not run ``node``: always, its math is the plugin's."""
    return f"node '{node.name}': {_math_refusal(node)}"


def prepare_custom_op(node: hg.CustomOpNode) -> Prepared:
    """No lowering: raises what :func:`custom_op_refusal` says (the engines refuse the node
    before they prepare it; this is for a caller that prepares it anyway).

    Raises:
        HipdnnError: ``GRAPH_NOT_SUPPORTED``, always.
    """
    raise hg.HipdnnError(hg.ErrorCode.GRAPH_NOT_SUPPORTED, custom_op_refusal(node))


#: the node types this module lowers, as the package collects them
FAMILIES = (TorchFamily(hg.NodeType.CUSTOM_OP, prepare_custom_op, custom_op_refusal),)
