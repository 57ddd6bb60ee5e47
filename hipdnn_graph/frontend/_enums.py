"""The enums hipDNN's bindings have and the core does not (values in binding order).

The shared ones (``DataType``, ``ErrorCode``, ``HeuristicMode``, ``BuildPlanPolicy``,
``DiagonalAlignment``, ``AttentionImplementation``) are the core's own.

Example:
    >>> from hipdnn_graph.frontend import AttentionImplementation, TimingQuality
    >>> AttentionImplementation.UNIFIED.name, TimingQuality.INVALID.value
    ('UNIFIED', 0)
    >>> import hipdnn_graph as hg
    >>> AttentionImplementation is hg.types.AttentionImplementation
    True
"""

from __future__ import annotations

from ..backend.knobs import BehaviorNote
from ..types import AttentionImplementation, HipdnnEnum

__all__ = ["AttentionImplementation", "BehaviorNote", "PluginLoadingMode", "TimingQuality"]


class PluginLoadingMode(HipdnnEnum):
    """How :func:`~hipdnn_graph.frontend.set_engine_plugin_paths` treats the loaded plugins."""

    ADDITIVE = 0
    ABSOLUTE = 1


class TimingQuality(HipdnnEnum):
    """How :meth:`~hipdnn_graph.frontend.Graph.execute_timed_ext` measured."""

    INVALID = 0
    DEVICE_ONLY = 1
    UNSTALLED = 2
