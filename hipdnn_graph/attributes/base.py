"""The shared machinery of node attributes, by its old path: :class:`NodeAttributes`
(:mod:`.node_attributes`), :class:`MaskWindow` (:mod:`.mask_window`),
:class:`SdpaCommonAttributes` (:mod:`.sdpa_common`) and the setters' checks (:mod:`.checks`).

Example:
    >>> from hipdnn_graph.attributes import base, sdpa_common
    >>> base.SdpaCommonAttributes is sdpa_common.SdpaCommonAttributes
    True
"""

from __future__ import annotations

from .checks import checked_attn_scale, checked_dropout_probability
from .mask_window import MaskWindow
from .node_attributes import NodeAttributes, scalar_slots
from .sdpa_common import SdpaCommonAttributes

__all__ = [
    "MaskWindow",
    "NodeAttributes",
    "SdpaCommonAttributes",
    "checked_attn_scale",
    "checked_dropout_probability",
    "scalar_slots",
]
