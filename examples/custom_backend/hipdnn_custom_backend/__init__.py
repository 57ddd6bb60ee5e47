"""An example third-party hipdnn-graph plugin: ``CUSTOM_NUMPY_SDPA_FWD_ENGINE``.

Registered through the entry point ``custom`` in the group ``hipdnn_graph.backends`` (see this
package's ``pyproject.toml``).
"""

from .engine import (
    ENGINE_NAME,
    ROW_BLOCK_KNOB,
    SUPPORTED_FEATURES,
    SUPPORTED_KINDS,
    CustomBackend,
    CustomSdpaForwardEngine,
    CustomSdpaForwardPlan,
)

__all__ = [
    "ENGINE_NAME",
    "ROW_BLOCK_KNOB",
    "SUPPORTED_FEATURES",
    "SUPPORTED_KINDS",
    "CustomBackend",
    "CustomSdpaForwardEngine",
    "CustomSdpaForwardPlan",
    "create_backend",
]


def create_backend() -> CustomBackend:
    """Entry-point factory: hipdnn-graph calls this once, the first time it needs engines."""
    return CustomBackend()
