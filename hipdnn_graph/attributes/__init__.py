"""Attribute models of the graph and of each node."""

from .base import MaskWindow, NodeAttributes
from .graph_attributes import GraphAttributes
from .sdpa import SdpaAttributes
from .sdpa_backward import SdpaBackwardAttributes

__all__ = [
    "GraphAttributes",
    "MaskWindow",
    "NodeAttributes",
    "SdpaAttributes",
    "SdpaBackwardAttributes",
]
