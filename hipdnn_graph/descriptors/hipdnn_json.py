"""hipDNN's JSON form of a graph, both ways (HIPDNN_WIRE.md part B).

The shape is the one hipDNN's ``FBI/utilities/json`` helpers write: keys sorted at every level,
compact, every key present (``null`` for an absent optional) unless a family's helper leaves it
out; data types in lower case (``"bfloat16"``), alignments and implementations in upper case;
each node has ``inputs`` and ``outputs`` objects of ``<x>_tensor_uid`` keys and its scalars under
``"attributes"`` or ``"parameters"``, among the inputs, or on the node object itself, as its
family's :class:`~.node_spec.NodeSpec` declares; binary32 values are written as the
shortest digits of their exact double (``0.1f`` → ``0.10000000149011612``), in nlohmann's number
format. The JSON holds exactly what the bytes hold: ``to_json(read(bytes))`` read back writes the
same bytes.

Where hipDNN's own JSON loses data we keep it (FNUZ data types by name, ``BoolValue``); NaN and
±inf, which JSON cannot hold, are refused rather than written as ``null``.

The writer is :mod:`.json_write`, the reader :mod:`.json_read`; this module is their public face.

Example:
    >>> format_number(0.10000000149011612), format_number(1e15), format_number(1e-05)
    ('0.10000000149011612', '1e+15', '1e-05')
"""

from __future__ import annotations

from .json_read import graph_from_json
from .json_write import format_number, graph_to_json

__all__ = ["format_number", "graph_from_json", "graph_to_json"]
