"""The graph's content key: what a tuning result is stored under, as hipDNN's cache key.

hipDNN's schemas annotate what its key covers (``shared/reference/hipdnn_schemas/graph.fbs``
and ``tensor_attributes.fbs``); this module holds those annotations as data, in one place:

- ``cache_ignore`` fields are left out: the graph's name, its three default data types (each
  node and tensor carries the type it gets), preferred engine, override-shape flag, minimum
  engine API version and id; each node's name; each tensor's name.
- a tensor's ``uid`` (``cache_uid_key``) is left out: a tensor is its position in the graph's
  tensor list (``cache_uid_domain``), and every tensor reference (``cache_uid``: the
  attributes' ``*_tensor_uid`` and ``*_tensor_uids`` fields, except pointwise's
  ``axis_tensor_uid``, an axis index) becomes that position. Renumbering or renaming a graph
  keeps its key; rewiring an operand changes it.
- every other field, defaults included, is kept as written.

The key is the SHA-256 of the canonical JSON of what remains (the graph's hipDNN JSON).

Example:
    >>> import hipdnn_graph as hg
    >>> def graph(name, uid):
    ...     g = hg.Graph(name=name, io_data_type=hg.DataType.FLOAT,
    ...                  compute_data_type=hg.DataType.FLOAT)
    ...     x = g.tensor(name=name + "_x", dim=[4], uid=uid)
    ...     _ = g.pointwise(x, mode=hg.PointwiseMode.EXP).set_output(True)
    ...     return g
    >>> graph_content_key(graph("a", 1)) == graph_content_key(graph("b", 7))
    True
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import Graph

__all__ = ["GRAPH_IGNORED", "NODE_IGNORED", "TENSOR_IGNORED", "graph_content_key", "keyed_form"]

#: ``Graph`` fields marked ``cache_ignore`` in graph.fbs
GRAPH_IGNORED = frozenset({
    "name", "compute_data_type", "intermediate_data_type", "io_data_type",
    "preferred_engine_id", "is_override_shape_enabled", "min_required_engine_api_version", "id",
})  # fmt: skip
#: ``Node`` fields marked ``cache_ignore``
NODE_IGNORED = frozenset({"name"})
#: ``TensorAttributes`` fields left out: ``name`` (``cache_ignore``), ``uid``
#: (``cache_uid_key``: its ordinal is its position)
TENSOR_IGNORED = frozenset({"name", "uid"})
#: a field named like a tensor reference that is not one (no ``cache_uid`` on it)
_NOT_REFERENCES = frozenset({"axis_tensor_uid"})


def _is_reference(field: str) -> bool:
    return field not in _NOT_REFERENCES and field.endswith(("_tensor_uid", "_tensor_uids"))


def _fold(value: Any, ordinal: dict[int, int]) -> Any:
    if isinstance(value, list):
        return [ordinal.get(v, v) for v in value]
    return None if value is None else ordinal.get(value, value)


def _node(node: Any, ordinal: dict[int, int]) -> Any:
    if isinstance(node, dict):
        return {
            k: (_fold(v, ordinal) if _is_reference(k) else _node(v, ordinal))
            for k, v in node.items()
            if k not in NODE_IGNORED
        }
    if isinstance(node, list):
        return [_node(v, ordinal) for v in node]
    return node


def keyed_form(document: dict[str, Any]) -> dict[str, Any]:
    """What the key covers of a graph's hipDNN JSON document (see the module docstring)."""
    tensors = document.get("tensors", [])
    ordinal = {t["uid"]: i for i, t in enumerate(tensors)}
    kept: dict[str, Any] = {
        k: v for k, v in document.items() if k not in GRAPH_IGNORED | {"tensors", "nodes"}
    }
    kept["tensors"] = [
        {k: (_fold(v, ordinal) if _is_reference(k) else v) for k, v in t.items()
         if k not in TENSOR_IGNORED}
        for t in tensors
    ]  # fmt: skip
    kept["nodes"] = [_node(n, ordinal) for n in document.get("nodes", [])]
    return kept


def graph_content_key(graph: Graph) -> str:
    """The hex SHA-256 key of ``graph``'s content (validates and assigns uids when needed)."""
    form = keyed_form(json.loads(graph.to_json()))
    text = json.dumps(form, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
